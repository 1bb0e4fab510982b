"""Pretraining optimizers and learning-rate schedules (``spacy_elmo.pretrain.optimizers``): one
registered function each; the config accepts whatever is registered."""

from __future__ import annotations

import catalogue
import pytest
import torch

from spacy_elmo.pretrain import load_config
from spacy_elmo.pretrain.config import ConfigError, parse_settings
from spacy_elmo.pretrain.optimizers import adagrad_rows, make_optimizer, make_scheduler, optimizers, schedules


def _settings(**overrides):
    return parse_settings(load_config(None, {"paths.train": "train.txt", **overrides}))


def test_linear_schedule_warms_up_then_decays_to_zero():
    factor = schedules.get("linear")(4, 10)
    assert [factor(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert factor(4) == 1.0 and factor(7) == 0.5 and factor(10) == 0.0


def test_constant_schedule_after_warmup():
    factor = schedules.get("constant")(2, 100)
    assert [factor(s) for s in (0, 1, 2, 99)] == [0.5, 1.0, 1.0, 1.0]


def test_config_names_build_the_torch_objects():
    s = _settings(**{"optimizer.name": "adagrad", "optimizer.learning_rate": 0.2, "optimizer.warmup_steps": 0})
    model = torch.nn.Linear(2, 2)
    optimizer = make_optimizer(model, s.optimizer)
    assert isinstance(optimizer, torch.optim.Adagrad) and optimizer.defaults["lr"] == 0.2
    scheduler = make_scheduler(optimizer, s.optimizer, s.training.max_steps)
    assert scheduler.get_last_lr() == [0.2]


def test_a_registered_schedule_is_a_valid_config_value():
    with pytest.raises(ConfigError, match=r"optimizer\.schedule must be one of \('constant', 'linear'\)"):
        _settings(**{"optimizer.schedule": "halving_test"})

    @schedules.register("halving_test")
    def halving(warmup, total):
        return lambda step: 0.5 ** (step // 10)

    try:
        s = _settings(**{"optimizer.schedule": "halving_test"})
        scheduler = make_scheduler(make_optimizer(torch.nn.Linear(2, 2), s.optimizer), s.optimizer, 100)
        assert scheduler.get_last_lr() == [s.optimizer.learning_rate]
        assert sorted(optimizers.get_all()) == ["adagrad", "adam"]
    finally:  # the registry is the process's: later tests (the reference's) see only the package's
        catalogue.REGISTRY.pop((*schedules.namespace, "halving_test"))


@pytest.mark.parametrize("graph_learning_rate", [False, True])
def test_adagrad_on_rows_is_the_dense_step_where_other_rows_have_no_gradient(graph_learning_rate):
    """``adagrad_rows`` against torch's own Adagrad step on the whole weight, whose gradient is
    zero outside the rows (with repeats, as a sampled softmax reads them), over three steps:
    the same weight, sums and step count; the other rows never move. The learning rate a float,
    or a tensor as a recorded step keeps it."""
    s = _settings(**{"optimizer.name": "adagrad", "optimizer.learning_rate": 0.2, "optimizer.warmup_steps": 0})
    graph_device = torch.device("cpu") if graph_learning_rate else None
    torch.manual_seed(0)
    dense, by_rows = torch.nn.Linear(4, 50, bias=False), torch.nn.Linear(4, 50, bias=False)
    by_rows.load_state_dict(dense.state_dict())
    first = dense.weight.detach().clone()
    dense_optimizer = make_optimizer(dense, s.optimizer, graph_device)
    rows_optimizer = make_optimizer(by_rows, s.optimizer, graph_device)
    touched = set()
    for _ in range(3):
        rows = torch.randint(0, 50, (12,))
        rows[-1] = rows[0]  # a row read twice
        touched.update(rows.tolist())
        grad = torch.zeros(50, 4).index_add_(0, rows, torch.randn(12, 4))
        dense.weight.grad, by_rows.weight.grad = grad.clone(), grad.clone()
        dense_optimizer.step()
        adagrad_rows(rows_optimizer, by_rows.weight, rows)
        torch.testing.assert_close(by_rows.weight, dense.weight, rtol=1e-6, atol=1e-7)
    dense_state, rows_state = dense_optimizer.state[dense.weight], rows_optimizer.state[by_rows.weight]
    torch.testing.assert_close(rows_state["sum"], dense_state["sum"], rtol=1e-6, atol=0)
    assert float(rows_state["step"]) == float(dense_state["step"]) == 3
    untouched = sorted(set(range(50)) - touched)
    assert untouched and torch.equal(by_rows.weight[untouched], first[untouched])
