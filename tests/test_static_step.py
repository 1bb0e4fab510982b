"""The window step without the host (``spacy_elmo.pretrain.static_step``): it compiles as one
graph (a read back to the host would break it), and the compiled or recorded step trains as the
eager one does."""

from __future__ import annotations

import pytest
import torch

from conftest import FIXTURES
from spacy_elmo.pretrain import Trainer, load_config
from spacy_elmo.pretrain.config import ConfigError, parse_settings
from spacy_elmo.pretrain.static_step import StaticStep, compile_with_lstms, resolve_step_kind

CORPUS = FIXTURES / "wikitext_tiny"

#: A tiny biLM on windows of 5 tokens, 4 rows; Adagrad (its update is near linear in the
#: gradient, so float rounding stays float rounding: Adam's normalised update would turn a
#: gradient of 1e-9 against 0 into a step of the learning rate).
WINDOWS = {
    "paths.train": str(CORPUS / "train.txt"),
    "paths.dev": None,
    "model.filters": [[1, 8], [2, 8], [3, 16]],
    "model.char_embedding_dim": 4,
    "model.lstm_dim": 32,
    "model.projection_dim": 16,
    "model.cell_clip": 3.0,
    "model.proj_clip": 3.0,
    "vocab.size": 500,
    "corpus.batching": "windows",
    "corpus.window_length": 5,
    "corpus.shuffle_buffer": 200,
    "training.batch_tokens": 20,
    "training.distinct_tokens": 40,
    "objective.softmax": "sampled",
    "objective.n_negative_samples": 30,
    "objective.sparse_updates": False,
    "optimizer.name": "adagrad",
    "optimizer.learning_rate": 0.2,
    "optimizer.clip_norm": 1.0,
    "optimizer.warmup_steps": 0,
}


def _trainer(tmp_path, name, device, **overrides) -> Trainer:
    settings = parse_settings(load_config(None, {**WINDOWS, **overrides}))
    gpu_id = device.index or 0 if device.type == "cuda" else -1
    return Trainer(settings, tmp_path / name, gpu_id=gpu_id, show_progress=False)


def _train(trainer: Trainer, steps: int) -> None:
    torch.manual_seed(5)  # dropout and the negatives come from torch's default generator
    if trainer.device.type == "cuda":
        torch.cuda.manual_seed(5)
    batches = trainer.batches()
    for _ in range(steps):
        trainer.train_step(next(batches))
        trainer.step += 1


def _compiled_step(trainer: Trainer) -> StaticStep:
    """The compiled step's forward and backward as one graph (``fullgraph``); ``aot_eager`` runs
    its graphs with the eager kernels (the CPU has no other compiler here), with the backward
    traced by AOT autograd. The update (compiled on a GPU only) breaks its graph, as in training:
    dynamo never traces the LR scheduler's wrapper around ``optimizer.step`` nor GradScaler's
    methods (both on its skip list; the first lent GPU runs failed here with ``fullgraph``)."""
    options = {"fullgraph": True}
    if trainer.device.type == "cpu":
        options["backend"] = "aot_eager"
    step = StaticStep(trainer, "compile", trainer.settings.training.distinct_tokens, options)
    if trainer.device.type == "cuda":
        step.update = compile_with_lstms(trainer.clip_and_step)
    return step


@pytest.mark.parametrize("threads", [1, 2])
def test_the_compiled_window_step_is_one_graph_and_trains_as_the_eager_one(tmp_path, device, threads, monkeypatch):
    """With ``fullgraph=True`` any read back to the host (an ``.item()``, a data-dependent shape,
    a Python branch on a tensor) is an error, so this compiles only a step that never waits for
    the device: char CNN, both clipped LSTM stacks from carried states, dropout, negatives
    drawn on the device, the sampled softmax. It then gives the eager step's parameters: on the
    CPU at 2 threads, an eager step whose two directions ran side by side with their dropout
    masks drawn beforehand."""
    import spacy_elmo.nn.side_by_side as engine
    from spacy_elmo.nn.threads import torch_threads

    side_by_side: list = []
    apply = engine._ThreadedRuns.apply
    monkeypatch.setattr(engine._ThreadedRuns, "apply", lambda *args: side_by_side.append(1) or apply(*args))
    with torch_threads(threads):  # the trainers set it for the process: put back afterwards
        eager = _trainer(tmp_path, "eager", device, **{"system.threads": threads})
        compiled = _trainer(tmp_path, "compiled", device, **{"system.threads": threads})
        runs: list = []
        compiled.static_step = _Counting(_compiled_step(compiled), runs)
        for trainer in (eager, compiled):
            _train(trainer, 3)
    assert len(runs) == 3  # every step ran compiled
    assert len(side_by_side) == (3 if threads == 2 and device.type == "cpu" else 0)
    for (name, a), b in zip(eager.model.named_parameters(), compiled.model.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)
    for (h, c), (h2, c2) in zip(eager.carried.states.forward, compiled.carried.states.forward):
        torch.testing.assert_close(h2, h, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(c2, c, rtol=1e-5, atol=1e-6)


class _Counting:
    """A StaticStep that counts the batches it ran."""

    def __init__(self, step: StaticStep, runs: list) -> None:
        self.step, self.runs = step, runs

    def accepts(self, batch) -> bool:
        return self.step.accepts(batch)

    def __call__(self, batch):
        self.runs.append(batch.n_distinct)
        return self.step(batch)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_the_recorded_window_step_trains_as_the_eager_one(tmp_path):
    """``"cuda_graph"``: a few eager steps, one recording, then replays, against eager steps."""
    device = torch.device("cuda", 0)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # exact fp32
    eager = _trainer(tmp_path, "eager", device, **{"training.step": "eager"})
    graphed = _trainer(tmp_path, "graphed", device, **{"training.step": "cuda_graph"})
    assert graphed.static_step is not None and graphed.static_step.kind == "cuda_graph"
    for trainer in (eager, graphed):
        _train(trainer, 8)
    assert graphed.static_step._graph is not None  # recorded after the warm-up, then replayed
    for (name, a), b in zip(eager.model.named_parameters(), graphed.model.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="compile_graph records a CUDA graph: it needs a GPU")
@pytest.mark.parametrize(
    "kind, setting",
    [("compile_graph", None), ("cuda_graph", "fused_cell"), ("cuda_graph", "directions_on_streams"),
     ("cuda_graph", "lstm_wavefront"), ("cuda_graph", "all")],
)  # fmt: skip
def test_the_compiled_and_recorded_step_the_fused_cell_and_the_streams_train_as_the_eager_step(tmp_path, kind, setting):
    """``"compile_graph"`` (the compiled update recorded as one graph), and ``"cuda_graph"``
    with ``[training] fused_cell`` (the cell compiled inside the recorded eager step) or
    ``directions_on_streams`` (the directions on two streams inside the graph) or
    ``lstm_wavefront`` (each layer on a stream) alone, or all three (their "auto" on CUDA),
    against eager steps without any of them (every way draws the dropout masks first, alike)."""
    device = torch.device("cuda", 0)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # exact fp32
    names = ("fused_cell", "directions_on_streams", "lstm_wavefront")
    eager = _trainer(tmp_path, "eager", device, **{"training.step": "eager", **{f"training.{n}": False for n in names}})
    overrides = {"training.step": kind, **{f"training.{n}": setting in (n, "all") for n in names}}
    other = _trainer(tmp_path, kind, device, **overrides)
    assert other.static_step.kind == kind
    for trainer in (eager, other):
        _train(trainer, 8)
    assert other.static_step._graph is not None
    for (name, a), b in zip(eager.model.named_parameters(), other.model.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)


def test_the_speed_settings_reach_the_model_and_an_eager_cpu_step_runs_with_them(tmp_path):
    """``[training] fused_cell``, ``directions_on_streams`` and ``lstm_wavefront``: "auto" (the
    default) is on for CUDA's eager and recorded steps, off on the CPU and in compiled steps; set
    true, they reach the model, and on the CPU the
    step runs their sequential twins and trains as the default step (the wavefront runs autograd
    through the step loop where the default runs the training loop: the same numbers up to float
    rounding)."""
    from spacy_elmo.pretrain.build import lstm_step_settings

    names = ("fused_cell", "directions_on_streams", "lstm_wavefront")
    default = parse_settings(load_config(None, WINDOWS)).training
    assert lstm_step_settings(default, torch.device("cpu"), "eager") == dict.fromkeys(names, False)
    for kind in ("eager", "cuda_graph"):
        assert lstm_step_settings(default, torch.device("cuda"), kind) == dict.fromkeys(names, True)
    assert lstm_step_settings(default, torch.device("cuda"), "compile_graph") == dict.fromkeys(names, False)
    trainer = _trainer(tmp_path, "fused", torch.device("cpu"), **{f"training.{n}": True for n in names})
    assert all(getattr(trainer.model, name) for name in names)
    today = _trainer(tmp_path, "today", torch.device("cpu"))
    assert not any(getattr(today.model, name) for name in names)
    for each in (today, trainer):
        _train(each, 2)
    for (name, a), b in zip(today.model.named_parameters(), trainer.model.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)


def test_step_kinds_that_cannot_run_are_refused_with_the_way_out():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert resolve_step_kind("auto", True, cuda, "bf16") == "cuda_graph"
    assert resolve_step_kind("auto", True, cpu, "fp32") == "eager"
    assert resolve_step_kind("auto", False, cuda, "fp32") == "eager"
    assert resolve_step_kind("auto", True, cuda, "fp16") == "eager"
    with pytest.raises(ConfigError, match='batching = "windows"'):
        resolve_step_kind("compile", False, cpu, "fp32")
    with pytest.raises(ConfigError, match="runs on a GPU"):
        resolve_step_kind("cuda_graph", True, cpu, "fp32")
    with pytest.raises(ConfigError, match="runs on a GPU"):
        resolve_step_kind("compile_graph", True, cpu, "bf16")
    with pytest.raises(ConfigError, match='use "bf16"'):
        resolve_step_kind("compile", True, cuda, "fp16")


def test_batches_with_more_distinct_tokens_than_the_static_step_takes_run_eagerly_and_are_logged(tmp_path):
    """``[training] distinct_tokens`` below a batch's distinct tokens: the batch runs eagerly
    (the step is never compiled here), and the log says how many did, instead of a silent
    slowdown."""
    import json

    trainer = _trainer(
        tmp_path, "fallback", torch.device("cpu"),
        **{"training.step": "compile", "training.distinct_tokens": 1, "training.max_steps": 3, "training.log_every": 1},
    )  # fmt: skip
    trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "fallback" / "metrics.jsonl").read_text().splitlines()]
    logged = [row for row in rows if "loss" in row]
    assert [row.get("eager_steps") for row in logged] == [1, 1, 1]


def test_a_resumed_optimizer_keeps_its_own_step_settings_and_learning_rate_type():
    """``training.step`` may change on resume: a run saved eagerly (the learning rate a number)
    resumes as a recorded or compiled step, whose learning rate must stay the device tensor the
    scheduler fills in place (a number would be baked into the graph), and back again; where
    training stands (the rate the schedule reached, the accumulators) comes from the checkpoint."""
    from spacy_elmo.pretrain.checkpoint import with_run_settings

    params = [torch.nn.Parameter(torch.ones(3))]
    eager = torch.optim.Adagrad(params, lr=0.2)
    params[0].grad = torch.ones(3)
    eager.step()
    eager.param_groups[0]["lr"] = 0.1  # where the schedule left it
    graphed = torch.optim.Adagrad(params, lr=torch.tensor(0.2), foreach=True)
    graphed.load_state_dict(with_run_settings(eager.state_dict(), graphed))
    group = graphed.param_groups[0]
    assert isinstance(group["lr"], torch.Tensor) and float(group["lr"]) == pytest.approx(0.1)
    assert group["foreach"] is True
    torch.testing.assert_close(graphed.state[params[0]]["sum"], eager.state[params[0]]["sum"])

    back = torch.optim.Adagrad(params, lr=0.2)
    back.load_state_dict(with_run_settings(graphed.state_dict(), back))
    assert back.param_groups[0]["lr"] == pytest.approx(0.1) and not isinstance(back.param_groups[0]["lr"], torch.Tensor)
    assert back.param_groups[0]["foreach"] is None


def test_the_softmax_stepped_on_its_rows_trains_as_the_whole_softmax(tmp_path, device):
    """A sampled softmax with dense gradients and Adagrad (the recorded step's case) is stepped on
    the rows its losses read (``Trainer.softmax_rows``): three steps give the parameters and the
    optimizer's sums of the whole-weight step, and rows no loss read stay where they were."""
    by_rows = _trainer(tmp_path, "rows", device)
    whole = _trainer(tmp_path, "whole", device)
    assert by_rows.softmax_rows
    whole.softmax_rows = whole.model.softmax.record_rows = False
    first = by_rows.model.softmax.weight.detach().clone()
    for trainer in (by_rows, whole):
        _train(trainer, 3)
    for (name, a), b in zip(whole.model.named_parameters(), by_rows.model.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)
    sums = [t.optimizer.state[t.model.softmax.weight]["sum"] for t in (whole, by_rows)]
    torch.testing.assert_close(sums[1], sums[0], rtol=1e-5, atol=1e-6)
    unmoved = (by_rows.model.softmax.weight == first).all(dim=1)
    assert 0 < int(unmoved.sum()) < len(first)  # some rows were never read, and they kept their values
    assert torch.equal(sums[1][unmoved], torch.full_like(sums[1][unmoved], sums[1].min()))
