"""Pretraining optimizers and learning-rate schedules (``spacy_elmo.pretrain.optimizers``): one
registered function each; the config accepts whatever is registered."""

from __future__ import annotations

import pytest
import torch

from spacy_elmo.pretrain import load_config
from spacy_elmo.pretrain.config import ConfigError, parse_settings
from spacy_elmo.pretrain.optimizers import make_optimizer, make_scheduler, optimizers, schedules


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
    with pytest.raises(ConfigError, match=r"\[optimizer\] schedule: must be one of \('constant', 'linear'\)"):
        _settings(**{"optimizer.schedule": "halving_test"})

    @schedules.register("halving_test")
    def halving(warmup, total):
        return lambda step: 0.5 ** (step // 10)

    s = _settings(**{"optimizer.schedule": "halving_test"})
    scheduler = make_scheduler(make_optimizer(torch.nn.Linear(2, 2), s.optimizer), s.optimizer, 100)
    assert scheduler.get_last_lr() == [s.optimizer.learning_rate]
    assert sorted(optimizers.get_all()) == ["adagrad", "adam"]
