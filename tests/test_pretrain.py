"""biLM pretraining on tiny shapes: learning, resuming, data parallelism, bad corpora."""

from __future__ import annotations

import itertools
import json
import os
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import spacy
import torch
from confection import Config
from safetensors.torch import load_file

from conftest import ELMO_FIXTURE, FIXTURES, TINY_BILM, checkout_pythonpath
from spacy_elmo import batch_to_ids, export_bilm_tf, load_bilm
from spacy_elmo.cli.plot_curve import plot_learning_curve
from spacy_elmo.nn.threads import run_side_by_side
from spacy_elmo.pretrain import (
    CorpusError,
    Trainer,
    Vocab,
    VocabError,
    load_config,
    pretrain,
)
from spacy_elmo.pretrain.config import ConfigError, model_overrides, parse_settings
from spacy_elmo.pretrain.corpus import BatchStream, CorpusSettings, DataPosition, SequenceReader, WindowStream
from spacy_elmo.pretrain.evaluate import evaluate_run
from spacy_elmo.pretrain.model import make_batch
from spacy_elmo.text_files import TextFileError

CORPUS = FIXTURES / "wikitext_tiny"
REPO = Path(__file__).resolve().parents[1]

TINY = {
    "paths.train": str(CORPUS / "train.txt"),
    "paths.dev": str(CORPUS / "valid.txt"),
    **TINY_BILM,
    "corpus.shuffle_buffer": 200,
    "training.batch_tokens": 400,
    "training.log_every": 1,
    "training.eval_every": 1000,
    "training.checkpoint_every": 1000,
    "optimizer.warmup_steps": 0,
}


def tiny_config(**overrides):
    return load_config(None, {**TINY, **overrides})


def tiny_settings(**overrides):
    return parse_settings(tiny_config(**overrides))


def _metrics(directory: Path):
    return [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines()]


def _weights(directory: Path):
    return {
        **load_file(str(directory / "model.safetensors")),
        **load_file(str(directory / "softmax.safetensors")),
    }


def _released_model_dir(tmp_path: Path) -> Path:
    """A released-model directory (options.json + weights.hdf5) holding the bilm-tf fixture."""
    released = tmp_path / "released"
    released.mkdir()
    (released / "options.json").write_bytes((ELMO_FIXTURE / "options.json").read_bytes())
    (released / "weights.hdf5").write_bytes((ELMO_FIXTURE / "lm_weights.hdf5").read_bytes())
    return released


def test_loss_falls_and_dev_perplexity_is_reported(tmp_path):
    config = tiny_config(
        **{"training.max_steps": 40, "training.eval_every": 40, "optimizer.learning_rate": 0.01}
    )
    pretrain(config, tmp_path, show_progress=False)
    records = [r for r in _metrics(tmp_path) if "loss" in r]
    first, last = (
        np.mean([r["loss"] for r in records[:5]]),
        np.mean([r["loss"] for r in records[-5:]]),
    )
    assert last < first - 0.5, (first, last)
    dev = [r for r in _metrics(tmp_path) if "dev_ppl" in r][-1]
    assert 1 < dev["dev_ppl_forward"] < 500 and 1 < dev["dev_ppl_backward"] < 500
    assert dev["dev_ppl"] == pytest.approx(0.5 * (dev["dev_ppl_forward"] + dev["dev_ppl_backward"]))
    vocab = Vocab.load(tmp_path / "vocab.txt")
    assert vocab.words[:3] == ["<S>", "</S>", "<UNK>"] and len(vocab) == 500

    # The saved files give back the trained LM: evaluate-lm reproduces the last evaluation.
    result = evaluate_run(tmp_path, [str(TINY["paths.dev"])], progress=False)
    assert result.tokens == dev["dev_tokens"]
    assert result.ppl_forward == pytest.approx(dev["dev_ppl_forward"], rel=1e-5)
    assert result.ppl_backward == pytest.approx(dev["dev_ppl_backward"], rel=1e-5)
    with pytest.raises(FileNotFoundError, match="softmax.safetensors is missing"):
        (tmp_path / "softmax.safetensors").unlink()
        evaluate_run(tmp_path, [str(TINY["paths.dev"])])


def test_the_learning_curve_is_a_png(tmp_path, matplotlib):
    pretrain(tiny_config(**{"training.max_steps": 2, "training.eval_every": 1}), tmp_path / "run", show_progress=False)
    png = plot_learning_curve(tmp_path / "run" / "metrics.jsonl", tmp_path / "curve.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_output_directory_loads_in_the_pipe_and_exports_to_bilm_tf(tmp_path):
    pretrain(
        tiny_config(**{"training.max_steps": 2, "training.eval_every": 1}),
        tmp_path / "run",
        show_progress=False,
    )
    bilm = load_bilm(tmp_path / "run")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"weights": str(tmp_path / "run")}})
    doc = nlp("The game began .")
    with torch.no_grad():
        layers = bilm(torch.from_numpy(batch_to_ids([["The", "game", "began", "."]])))[0]
    np.testing.assert_allclose(doc._.elmo_layers, layers[:, 0].numpy(), atol=1e-6)
    export_bilm_tf(bilm, tmp_path / "tf")
    again = load_bilm(tmp_path / "tf" / "options.json", tmp_path / "tf" / "weights.hdf5")
    ids = torch.from_numpy(batch_to_ids([["The", "game", "began", "."], ["Valkyria"]]))
    with torch.no_grad():
        np.testing.assert_allclose(again(ids)[0].numpy(), bilm(ids)[0].numpy(), atol=1e-6)


def _run_cli(args, **kwargs):
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "spacy_elmo", "pretrain", *args], cwd=REPO, env=env, **kwargs
    )


def _cli_overrides(**extra):
    flat = {**TINY, **extra}
    args = []
    for key, value in flat.items():
        args += [f"--{key}", json.dumps(value) if not isinstance(value, str) else value]
    return args


#: ``python -m spacy_elmo`` with Ctrl-C arriving at a given step (``STOP_AT_STEP``): the signal
#: goes to the process itself just before that step's update, so the run stops after that step
#: wherever the machine's load puts it in time (no race between the test's clock and the run's).
CTRL_C_AT_STEP = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal (pytest may ignore it)
from spacy_elmo.pretrain.trainer import Trainer
stop_at = int(os.environ["STOP_AT_STEP"])
train_step = Trainer.train_step
def ctrl_c_then_step(self, batch):
    if self.step + 1 == stop_at:
        os.kill(os.getpid(), signal.SIGINT)
    return train_step(self, batch)
Trainer.train_step = ctrl_c_then_step
from spacy_elmo.cli import main
sys.argv[0] = "spacy_elmo"
main()
"""


def _run_cli_with_ctrl_c(args, stop_at_step: int):
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1", "STOP_AT_STEP": str(stop_at_step)}
    return subprocess.run(
        [sys.executable, "-c", CTRL_C_AT_STEP, "pretrain", *args], cwd=REPO, env=env, capture_output=True,
        text=True, timeout=300,
    )


@pytest.mark.parametrize("command", ["pretrain", "embed"])
def test_an_ignored_ctrl_c_stays_ignored(command):
    """nohup and a shell's background job start a command with SIGINT ignored: pretrain's (and
    adapt's) Ctrl-C handling and embed's stop leave it so, and put a handled one back after."""
    import signal

    from spacy_elmo.embedding.interruption import stop_on_signals
    from spacy_elmo.pretrain.stop import StopRequest

    handling = StopRequest(distributed=False, speak=False).handling_ctrl_c if command == "pretrain" else stop_on_signals
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with handling():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with handling():
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def _pasted(line: str, **kwargs):
    """Run a printed ``python -m ...`` command as a user pastes it (this test's interpreter)."""
    words = shlex.split(line)
    assert words[0] == "python", line
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *words[1:]], cwd=REPO, env=env, capture_output=True, text=True, timeout=300, **kwargs)


@pytest.mark.slow
def test_resume_after_ctrl_c_as_printed_is_bit_for_bit(tmp_path):
    """Ctrl-C saves a checkpoint and prints the command that continues the run; pasted as
    printed (no config overrides repeated: the run's own config.cfg keeps its paths and
    max_steps), it ends bit for bit where a straight run ends, at the first run's max_steps, and
    ends with a summary whose first command works pasted."""
    config_file = tmp_path / "config.cfg"
    subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "init-config", str(config_file)], cwd=REPO, check=True
    )
    args = _cli_overrides(
        **{
            "training.max_steps": 12,
            "objective.softmax": "sampled",
            "objective.n_negative_samples": 50,
        }
    )

    straight = _run_cli([str(config_file), str(tmp_path / "straight"), *args])
    assert straight.wait(timeout=300) == 0

    interrupted = _run_cli_with_ctrl_c([str(config_file), str(tmp_path / "resumed"), *args], stop_at_step=5)
    assert interrupted.returncode == 130, interrupted.stderr  # stopped, not finished: scripts can tell
    assert "continue with --resume" in interrupted.stderr
    stopped = torch.load(tmp_path / "resumed" / "checkpoint" / "state.pt", weights_only=False)
    assert stopped["step"] == 5 and stopped["seconds"] > 0  # the first session's time, kept
    printed = interrupted.stderr.split("Continue it with: ")[1].splitlines()[0]

    resumed = _pasted(printed)
    assert resumed.returncode == 0, resumed.stderr
    a, b = _weights(tmp_path / "straight"), _weights(tmp_path / "resumed")
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    losses = lambda d: [r["loss"] for r in _metrics(d) if "loss" in r]  # noqa: E731
    assert losses(tmp_path / "resumed") == losses(tmp_path / "straight")
    assert [r["step"] for r in _metrics(tmp_path / "resumed") if "loss" in r][-1] == 12

    summary = resumed.stdout[resumed.stdout.index("Pretraining done: 12 steps"):]
    # the whole run's time: the resumed session's added to the first's
    assert max(r["seconds"] for r in _metrics(tmp_path / "resumed") if "seconds" in r) > stopped["seconds"]
    assert "held-out perplexity" in summary and f"Model: {tmp_path / 'resumed'}" in summary
    assert "held-out perplexity" in resumed.stdout.split("Pretraining done")[0]  # as evaluated
    demo = _pasted(summary.split("Use it:\n")[1].splitlines()[0].strip())
    assert demo.returncode == 0 and "Right sense wins" in demo.stdout, demo.stderr


def test_resume_takes_only_what_a_resume_may_change_and_names_it(tmp_path, monkeypatch):
    """On --resume the run's config.cfg rules: a resumable key changed on the command line is
    applied and named, the first run's own overrides repeated are accepted, another key refused."""
    from typer.testing import CliRunner

    from spacy_elmo.cli import app
    from spacy_elmo.pretrain.resume import resumed_config

    pretrain(tiny_config(**{"training.max_steps": 2}), tmp_path, show_progress=False)
    config, changes = resumed_config(tmp_path, {"training.max_steps": 4, "paths.dev": str(CORPUS / "train.txt")})
    assert config["training"]["max_steps"] == 4 and config["paths"]["train"] == TINY["paths.train"]
    assert config["corpus"]["dev"] == "${paths.dev}"  # kept for the resumed run's config.cfg
    assert config.interpolate()["corpus"]["dev"] == str(CORPUS / "train.txt")
    dev = f"{TINY['paths.dev']!r} -> {str(CORPUS / 'train.txt')!r}"
    assert changes == [f"paths.dev: {dev}", f"corpus.dev: {dev}", "training.max_steps: 2 -> 4"]  # config order
    assert resumed_config(tmp_path, {"model.lstm_dim": 32, "training.max_steps": 2})[1] == []
    resumed = CliRunner().invoke(
        app, ["pretrain", str(tmp_path / "config.cfg"), str(tmp_path), "--resume", "--training.max_steps", "3"]
    )
    assert resumed.exit_code == 0, resumed.output
    assert "changed on resume: training.max_steps: 2 -> 3" in resumed.output
    assert "Pretraining done: 3 steps" in resumed.output
    assert "dev = ${paths.dev}" in (tmp_path / "config.cfg").read_text()  # the next resume's --paths.dev too
    with pytest.raises(ConfigError, match=r"not model.lstm_dim: 32 -> 64.*--paths.init_bilm"):
        resumed_config(tmp_path, {"model.lstm_dim": 64})
    with pytest.raises(ConfigError, match=r"override 'training.max_stepz' does not name a key of .*config.cfg"):
        resumed_config(tmp_path, {"training.max_stepz": 64})


def test_a_run_that_recorded_its_paths_written_out_resumes_with_another_dev_through_corpus_dev(tmp_path):
    """A run whose config.cfg holds its paths written out (as runs of earlier versions wrote it,
    with no ``corpus.dev = ${paths.dev}``): a changed ``--paths.dev`` would change nothing the run
    reads, so it is refused naming the key that does; ``--corpus.dev`` and a repeated
    ``--paths.dev`` are taken."""
    from spacy_elmo.pretrain.resume import resumed_config

    pretrain(tiny_config(**{"training.max_steps": 2}), tmp_path, show_progress=False)
    saved = tmp_path / "config.cfg"
    Config().from_disk(saved).to_disk(saved)  # references resolved
    assert "${" not in saved.read_text()
    other = str(CORPUS / "train.txt")
    with pytest.raises(ConfigError, match=r"refers to \$\{paths.dev\}.*--corpus.dev"):
        resumed_config(tmp_path, {"paths.dev": other})
    assert resumed_config(tmp_path, {"paths.dev": TINY["paths.dev"]})[1] == []
    config, changes = resumed_config(tmp_path, {"corpus.dev": other})
    assert config["corpus"]["dev"] == other and changes == [f"corpus.dev: {TINY['paths.dev']!r} -> {other!r}"]


def test_resume_drops_the_metrics_a_killed_run_logged_after_its_checkpoint(tmp_path):
    """A run killed between checkpoints leaves metrics.jsonl rows past its last checkpoint; the
    resumed run computes those steps again and logs each step once, as a straight run does."""
    config = lambda steps: tiny_config(  # noqa: E731
        **{"optimizer.schedule": "constant", "training.max_steps": steps}
    )
    pretrain(config(6), tmp_path / "straight", show_progress=False)
    pretrain(config(3), tmp_path / "killed", show_progress=False)
    metrics = tmp_path / "killed" / "metrics.jsonl"
    lost = [{"step": 4, "loss": 99.0}, {"step": 5, "loss": 99.0}]
    metrics.write_text(metrics.read_text() + "".join(json.dumps(row) + "\n" for row in lost))
    pretrain(config(6), tmp_path / "killed", resume=True, show_progress=False)
    steps = lambda d: [(r["step"], r["loss"]) for r in _metrics(d) if "loss" in r]  # noqa: E731
    assert [step for step, _ in steps(tmp_path / "killed")] == [1, 2, 3, 4, 5, 6]
    assert steps(tmp_path / "killed") == steps(tmp_path / "straight")


@pytest.mark.slow
def test_two_process_gloo_equals_one_process_with_both_shards(tmp_path):
    overrides = {
        "training.max_steps": 3,
        "objective.dropout": 0.0,
        "objective.softmax": "full",
        "vocab.path": str(tmp_path / "vocab.txt"),
    }
    # one vocabulary for both runs, built from the whole corpus
    Vocab.from_counts(
        __import__("collections").Counter(
            t
            for s in SequenceReader([CORPUS / "train.txt"], CorpusSettings(max_sequence_length=30))
            for t in s
        ),
        500,
    ).save(tmp_path / "vocab.txt")
    config_file = tmp_path / "config.cfg"
    tiny_config(**overrides).to_disk(config_file)
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--standalone",
        "-m",
        "spacy_elmo",
        "pretrain",
        str(config_file),
        str(tmp_path / "ddp"),
    ]
    run = subprocess.run(cmd, cwd=REPO, env=env, timeout=300, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]  # torchrun's report names the failing rank

    single = Trainer(tiny_settings(**overrides), tmp_path / "single", show_progress=False)
    settings = parse_settings(tiny_config(**overrides))
    streams = [
        BatchStream(
            single.train_files,
            settings.corpus,
            settings.training.batch_tokens,
            settings.corpus.shuffle_buffer,
            settings.system.seed,
            rank,
            2,
        ).batches()
        for rank in range(2)
    ]
    for _ in range(3):
        merged = make_batch([sentence for s in streams for sentence in next(s)], single.vocab)  # both ranks' rows
        single.train_step(merged)
    ddp = _weights(tmp_path / "ddp")
    for name, value in single.model.bilm.state_dict().items():
        np.testing.assert_allclose(value.numpy(), ddp[name].numpy(), atol=2e-5, err_msg=name)
    ddp_losses = [r["loss"] for r in _metrics(tmp_path / "ddp") if "loss" in r]
    assert len(ddp_losses) == 3


def test_empty_and_blank_corpora_are_refused(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n   \n\t\n" * 50)
    for path in (empty, blank):
        with pytest.raises(CorpusError, match="holds no tokens"):
            pretrain(
                tiny_config(**{"paths.train": str(path), "paths.dev": None}),
                tmp_path / path.stem,
                show_progress=False,
            )


def test_megabyte_line_and_bad_utf8_are_handled(tmp_path):
    corpus = tmp_path / "train.txt"
    with corpus.open("wb") as f:
        f.write(b"a fine first line .\n")
        f.write(b"bad \xff\xfe bytes here\n")
        f.write(("word " * 200_000).encode() + b"\n")  # 1 MB, one line
        f.write(b"a fine last line .\n")
    reader = SequenceReader([corpus], CorpusSettings(max_sequence_length=30, on_decode_error="skip"))
    sequences = list(reader)
    assert reader.stats.skipped_lines == 1
    assert max(map(len, sequences)) == 30 and sum(map(len, sequences)) == 200_000 + 10
    with pytest.raises(TextFileError, match=r"train.txt, line 2: not UTF-8 \(byte 0xff at column 5\)"):
        list(SequenceReader([corpus], CorpusSettings()))
    pretrain(
        tiny_config(**{"paths.train": str(corpus), "paths.dev": None, "training.max_steps": 2, "corpus.on_decode_error": "skip"}),
        tmp_path / "out",
        show_progress=False,
    )
    assert _metrics(tmp_path / "out")[-1]["skipped_lines"] == 1


def test_resume_with_another_vocabulary_is_refused(tmp_path):
    pretrain(tiny_config(**{"training.max_steps": 1}), tmp_path, show_progress=False)
    words = (tmp_path / "vocab.txt").read_text().splitlines()
    (tmp_path / "vocab.txt").write_text("\n".join(words[:-1] + ["zzz-not-in-checkpoint"]) + "\n")
    with pytest.raises(VocabError, match="vocab.txt.*not the one checkpoint"):
        Trainer(
            tiny_settings(**{"training.max_steps": 2}), tmp_path, resume=True, show_progress=False
        )
    with pytest.raises(FileExistsError, match="--resume"):
        Trainer(tiny_settings(), tmp_path, show_progress=False)


def test_bad_vocab_file_and_config_values(tmp_path):
    bad = tmp_path / "vocab.txt"
    bad.write_text("the\nof\n")
    with pytest.raises(VocabError, match="vocab.txt.*must start with"):
        Vocab.load(bad)
    with pytest.raises(ConfigError, match=r"optimizer\.name must be one of \('adagrad', 'adam'\), got 'sgd'"):
        tiny_settings(**{"optimizer.name": "sgd"})
    with pytest.raises(ConfigError, match=r"^training\.batch_tokens must be >= 1, got -3$"):
        tiny_settings(**{"training.batch_tokens": -3})
    with pytest.raises(CorpusError, match="batch_tokens"):
        BatchStream(
            [CORPUS / "train.txt"], CorpusSettings(max_sequence_length=100), batch_tokens=50
        )


def test_batches_are_deterministic_and_sharded():
    settings = CorpusSettings(max_sequence_length=30)

    def take(rank, world, n=5):
        stream = BatchStream(
            [CORPUS / "train.txt"], settings, 400, 200, seed=3, rank=rank, world_size=world
        )
        it = stream.batches()
        return [next(it) for _ in range(n)]

    assert take(0, 1) == take(0, 1)
    shard0 = {" ".join(s) for b in take(0, 2, 10) for s in b}
    shard1 = {" ".join(s) for b in take(1, 2, 10) for s in b}
    assert shard0 and shard1 and not (shard0 & shard1)
    for batch in take(0, 1, 20):
        assert len(batch) * (max(map(len, batch)) + 2) <= 400


def test_log_uniform_sampler_follows_zipf():
    from spacy_elmo.nn.softmax import LogUniformSampler

    sampler = LogUniformSampler(10)
    ids = sampler.sample(200_000, torch.device("cpu"), torch.Generator().manual_seed(0))
    freq = torch.bincount(ids, minlength=10).double() / ids.numel()
    k = torch.arange(10, dtype=torch.float64)
    expected = torch.log((k + 2) / (k + 1)) / np.log(11)
    assert torch.allclose(freq, expected, atol=0.005)
    assert torch.allclose(
        sampler.log_expected_count(k.long(), 7).double(), torch.log(7 * expected), atol=1e-6
    )


def test_sampled_softmax_gradient_converges_to_its_limit():
    """Sampled softmax is trained for its gradient. With accidental hits removed (as in bilm-tf),
    its limit for many samples is the softmax gradient with the true word left out of the
    normaliser: d/dh [logsumexp_{w != t} s_w - s_t]."""
    from spacy_elmo.nn.softmax import LMSoftmax

    torch.manual_seed(0)
    softmax = LMSoftmax(50, 8)
    targets = torch.randint(0, 50, (20,))

    def grad(loss_fn):
        hidden = torch.randn(20, 8, generator=torch.Generator().manual_seed(1), requires_grad=True)
        loss_fn(hidden).sum().backward()
        return hidden.grad

    def limit(h):
        logits = h @ softmax.weight.t() + softmax.bias
        others = logits.masked_fill(torch.nn.functional.one_hot(targets, 50).bool(), float("-inf"))
        return torch.logsumexp(others, 1) - logits.gather(1, targets[:, None])[:, 0]

    expected = grad(limit)
    gen = torch.Generator().manual_seed(0)
    many = grad(lambda h: softmax.sampled_nll(h, targets, 50_000, gen))
    few = grad(lambda h: softmax.sampled_nll(h, targets, 3, gen))
    scale = expected.abs().max()
    assert (many - expected).abs().max() < 0.02 * scale
    assert (few - expected).abs().max() > 0.1 * scale


SPARSE_RECIPE = {
    "objective.softmax": "sampled",
    "objective.n_negative_samples": 40,
    "optimizer.name": "adagrad",
    "optimizer.learning_rate": 0.2,
    "optimizer.clip_norm": 1.0,
}


def test_sparse_softmax_updates_equal_dense_adagrad(tmp_path):
    """Row-sparse softmax updates give dense Adagrad's weights (rows a step does not use keep
    their values and accumulators), while the softmax gradient holds only the used rows."""
    config = tiny_settings(**SPARSE_RECIPE, **{"training.max_steps": 3})
    weights, row_counts = {}, []
    for mode in (True, False):
        trainer = Trainer(
            tiny_settings(**SPARSE_RECIPE, **{"objective.sparse_updates": mode}),
            tmp_path / str(mode),
            show_progress=False,
        )
        assert trainer.sparse_updates is mode
        batches = trainer.stream.batches()
        for _ in range(3):
            trainer.train_step(make_batch(next(batches), trainer.vocab))
            grad = trainer.model.softmax.weight.grad
            assert grad.is_sparse is mode
            if mode:
                row_counts.append(grad.coalesce().indices().shape[1])
        weights[mode] = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    assert all(0 < n < len(trainer.vocab) for n in row_counts)
    for name, dense in weights[False].items():
        torch.testing.assert_close(weights[True][name], dense, atol=1e-6, rtol=1e-5, msg=name)
    # the default ("auto") picks sparse updates for this recipe, dense for adam
    assert Trainer(config, tmp_path / "auto", show_progress=False).sparse_updates
    adam = tiny_settings(**{**SPARSE_RECIPE, "optimizer.name": "adam"})
    assert not Trainer(adam, tmp_path / "adam", show_progress=False).sparse_updates
    strict = tiny_settings(**{**SPARSE_RECIPE, "optimizer.name": "adam"}, **{"objective.sparse_updates": True})
    with pytest.raises(ConfigError, match="sparse_updates = true needs"):
        Trainer(strict, tmp_path / "strict", show_progress=False)


@pytest.mark.slow
def test_two_process_gloo_sparse_rows_equal_dense(tmp_path):
    """Data parallel: ranks exchanging the softmax rows they used end where DDP's dense
    all-reduce of the whole softmax ends."""
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1"}
    results = {}
    for mode in ("true", "false"):
        config_file = tmp_path / f"{mode}.cfg"
        tiny_config(
            **SPARSE_RECIPE, **{"training.max_steps": 3, "objective.sparse_updates": mode == "true"}
        ).to_disk(config_file)
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
            "--standalone", "-m", "spacy_elmo", "pretrain",
            str(config_file), str(tmp_path / mode),
        ]  # fmt: skip
        run = subprocess.run(cmd, cwd=REPO, env=env, timeout=300, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-3000:]  # torchrun's report names the failing rank
        results[mode] = _weights(tmp_path / mode)
    for name, dense in results["false"].items():
        np.testing.assert_allclose(results["true"][name].numpy(), dense.numpy(), atol=2e-5, err_msg=name)
    # the softmax learned, on the rows the steps sampled only (its bias starts at zero)
    touched = int((results["true"]["bias"] != 0).sum())
    assert 0 < touched < results["true"]["bias"].numel()


def test_pretraining_continues_from_a_pretrained_or_released_bilm(tmp_path):
    first = pretrain(tiny_config(**{"training.max_steps": 3}), tmp_path / "first", show_progress=False)
    trained = _weights(first)

    # a pretraining output with this run's vocabulary: the biLM and the softmax carry over
    carry = tiny_settings(**{"paths.init_bilm": str(first), "vocab.path": str(first / "vocab.txt")})
    trainer = Trainer(carry, tmp_path / "second", show_progress=False)
    for name, value in {**trainer.model.bilm.state_dict(), **trainer.model.softmax.state_dict()}.items():
        assert torch.equal(value, trained[name]), name
    # another vocabulary: the biLM carries over, the softmax starts fresh
    other_vocab = tiny_settings(**{"paths.init_bilm": str(first), "vocab.size": 300})
    other = Trainer(other_vocab, tmp_path / "third", show_progress=False)
    key = "token_encoder.projection.weight"
    assert torch.equal(other.model.bilm.state_dict()[key], trained[key])
    assert other.model.softmax.weight.shape[0] == 300 and not other.model.softmax.bias.any()

    # another shape: refused, naming the option and the way out
    with pytest.raises(ConfigError, match=r"lstm.dim: 64 in \[model\], 32 in the model.*init-config"):
        wider = tiny_settings(**{"paths.init_bilm": str(first), "model.lstm_dim": 64})
        Trainer(wider, tmp_path / "bad", show_progress=False)

    # a released (bilm-tf) model: init-config --model writes [model] from its options.json
    released = _released_model_dir(tmp_path)
    config_file = tmp_path / "from_released.cfg"
    subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "init-config", str(config_file), "--model", str(released)],
        cwd=REPO, check=True, capture_output=True,
    )
    assert "# Start from an existing biLM" in config_file.read_text()  # the comments are kept
    config = load_config(config_file, {k: v for k, v in TINY.items() if not k.startswith("model.")})
    start = Trainer(parse_settings(config), tmp_path / "continued", show_progress=False)
    reference = load_bilm(released)
    assert start.settings.options == reference.options
    for name, value in reference.state_dict().items():
        assert torch.equal(start.model.bilm.state_dict()[name], value), name
    nll, count = start.train_step(make_batch(next(start.stream.batches()), start.vocab))
    assert torch.isfinite(nll).all() and count > 0


def test_softmax_only_steps_fit_a_fresh_softmax_and_leave_the_bilm_alone(tmp_path):
    """A continued run whose softmax starts fresh (a released model has none) first trains the
    softmax alone: the biLM is bit for bit the initial one until the last softmax-only step,
    then it trains too."""
    first = pretrain(tiny_config(**{"training.max_steps": 3}), tmp_path / "first", show_progress=False)
    start = _weights(first)
    settings = tiny_settings(
        **{
            "paths.init_bilm": str(first),
            "vocab.size": 300,  # another vocabulary: the softmax starts fresh
            "initialize.softmax_only_steps": 2,
            "training.max_steps": 3,
        }
    )
    trainer = Trainer(settings, tmp_path / "second", show_progress=False)
    fresh_softmax = trainer.model.softmax.weight.detach().clone()
    batches = trainer.stream.batches()
    for step in range(3):
        trainer.train_step(make_batch(next(batches), trainer.vocab))
        trainer.step += 1
        bilm = trainer.model.bilm.state_dict()
        unchanged = [name for name, value in bilm.items() if torch.equal(value, start[name])]
        if step < 2:
            assert len(unchanged) == len(bilm), f"step {step}: the biLM changed"
        else:
            assert len(unchanged) < len(bilm) // 2, f"step {step}: the biLM did not train"
        assert not torch.equal(trainer.model.softmax.weight, fresh_softmax)
    assert not trainer.model.bilm_frozen or trainer.step <= 2


def test_a_released_model_gets_a_softmax_and_a_perplexity(tmp_path):
    """softmax_only_steps = max_steps: the run only fits a softmax to a released (bilm-tf) model,
    whose weights come out unchanged, and evaluate-lm can then score it."""
    released = _released_model_dir(tmp_path)
    reference = load_bilm(released)
    settings = {
        **model_overrides(reference.options),
        "paths.init_bilm": str(released),
        "training.max_steps": 2,
        "initialize.softmax_only_steps": 2,
    }
    out = pretrain(tiny_config(**settings), tmp_path / "fitted", show_progress=False)
    fitted = load_bilm(out)
    for name, value in reference.state_dict().items():
        assert torch.equal(fitted.state_dict()[name], value), name
    result = evaluate_run(out, [str(TINY["paths.dev"])], progress=False)
    assert result.tokens > 0 and np.isfinite(result.ppl_average)


def test_sampled_softmax_matches_its_formula_and_survives_all_hits():
    """The loss is bilm-tf's: logsumexp over [true; negatives] of logits corrected by
    -log(expected count), accidental hits removed (checked in float64 NumPy); a row whose every
    negative is a hit has loss 0 and a finite gradient."""
    from spacy_elmo.nn.softmax import LMSoftmax

    torch.manual_seed(0)
    softmax = LMSoftmax(30, 6)
    hidden = torch.randn(12, 6)
    targets = torch.randint(0, 30, (12,))
    got = softmax.sampled_nll(hidden, targets, 25, torch.Generator().manual_seed(3))
    sampled = softmax.sampler.sample(25, hidden.device, torch.Generator().manual_seed(3)).numpy()
    w, b = softmax.weight.detach().double().numpy(), softmax.bias.detach().double().numpy()
    h, t = hidden.double().numpy(), targets.numpy()
    log_q = lambda ids: np.log(25 * np.log((ids + 2.0) / (ids + 1.0)) / np.log(31.0))  # noqa: E731
    true = (h * w[t]).sum(1) + b[t] - log_q(t)
    negatives = h @ w[sampled].T + b[sampled] - log_q(sampled)
    negatives[t[:, None] == sampled[None, :]] = -np.inf
    logits = np.concatenate([true[:, None], negatives], axis=1)
    top = logits.max(1, keepdims=True)
    want = np.log(np.exp(logits - top).sum(1)) + top[:, 0] - true
    np.testing.assert_allclose(got.detach().numpy(), want, atol=1e-5)

    single = LMSoftmax(1, 6)  # every negative is word 0, the only target
    h1 = torch.randn(3, 6, requires_grad=True)
    loss = single.sampled_nll(h1, torch.zeros(3, dtype=torch.long), 5)
    loss.sum().backward()
    assert torch.equal(loss.detach(), torch.zeros(3))
    assert torch.isfinite(h1.grad).all() and torch.isfinite(single.weight.grad).all()


DETERMINISTIC = {
    "training.max_steps": 6,
    "objective.softmax": "sampled",  # the sampler's generator is part of the state
    "objective.n_negative_samples": 50,
    "optimizer.schedule": "constant",  # the learning rate of step 3 must not depend on max_steps
    "system.threads": 1,
}


def test_two_seeded_cpu_runs_give_bitwise_identical_weights(tmp_path):
    """Same seed, same thread count, CPU: the same weights to the bit (dropout, shuffling and
    sampled negatives included). Another seed gives other weights, so the check can fail."""
    runs = {}
    for name, seed in (("a", 0), ("b", 0), ("other", 1)):
        pretrain(tiny_config(**DETERMINISTIC, **{"system.seed": seed}), tmp_path / name, show_progress=False)
        runs[name] = _weights(tmp_path / name)
    assert runs["a"].keys() == runs["b"].keys()
    for name in runs["a"]:
        assert torch.equal(runs["a"][name], runs["b"][name]), name
    assert not torch.equal(runs["a"]["weight"], runs["other"]["weight"])
    losses = lambda d: [r["loss"] for r in _metrics(d) if "loss" in r]  # noqa: E731
    assert losses(tmp_path / "a") == losses(tmp_path / "b")


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    pretrain(tiny_config(**DETERMINISTIC), tmp_path / "straight", show_progress=False)
    pretrain(tiny_config(**{**DETERMINISTIC, "training.max_steps": 3}), tmp_path / "resumed", show_progress=False)
    pretrain(tiny_config(**DETERMINISTIC), tmp_path / "resumed", resume=True, show_progress=False)
    a, b = _weights(tmp_path / "straight"), _weights(tmp_path / "resumed")
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_a_checkpoint_loads_without_running_code_and_a_pickled_object_is_refused(tmp_path):
    """state.pt holds tensors and plain values only: it loads with weights_only=True (PyTorch's
    safe unpickler), windows' carried LSTM states included, and a state.pt holding any other
    object (what a shared checkpoint could smuggle in) is refused on --resume, naming the file."""
    config = tiny_config(**{**DETERMINISTIC, **WINDOWS, "training.max_steps": 2})
    pretrain(config, tmp_path / "run", show_progress=False)
    state_file = tmp_path / "run" / "checkpoint" / "state.pt"
    saved = torch.load(state_file, weights_only=True)
    assert saved["step"] == 2 and saved["ranks"][0]["lstm_states"] is not None
    saved["ranks"][0]["note"] = Path("any object")  # neither a tensor nor a plain value
    torch.save(saved, state_file)
    with pytest.raises(ConfigError, match="state.pt: not a checkpoint this version can resume safely"):
        pretrain(tiny_config(**{**DETERMINISTIC, **WINDOWS, "training.max_steps": 3}), tmp_path / "run", resume=True,
                 show_progress=False)


def test_threads_are_applied_recorded_and_restored(tmp_path):
    before = torch.get_num_threads()
    pretrain(
        tiny_config(**{"training.max_steps": 2, "system.threads": 2}), tmp_path / "run", show_progress=False
    )
    assert {r["threads"] for r in _metrics(tmp_path / "run") if "loss" in r} == {2}
    assert load_config(tmp_path / "run" / "config.cfg")["system"]["threads"] == 2
    assert torch.get_num_threads() == before
    with pytest.raises(TypeError, match="PretrainSettings"):
        Trainer(tiny_config(), tmp_path / "raw", show_progress=False)


def test_threads_option_of_the_pretrain_command(tmp_path):
    run = _run_cli(
        [str(REPO / "project" / "configs" / "pretrain_wikitext2.cfg"), str(tmp_path / "run"),
         "--threads", "2", *_cli_overrides(**{"training.max_steps": 1, "vocab.path": None})],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    assert run.wait(timeout=300) == 0, run.stdout.read().decode()
    assert [r["threads"] for r in _metrics(tmp_path / "run") if "loss" in r] == [2]


def test_resume_refuses_a_changed_recipe_and_takes_a_longer_run(tmp_path):
    pretrain(tiny_config(**{"training.max_steps": 2}), tmp_path / "run", show_progress=False)
    changed = tiny_config(**{"training.max_steps": 4, "optimizer.learning_rate": 0.5})
    with pytest.raises(ConfigError, match=r"optimizer.learning_rate: 0.002 -> 0.5.*--paths.init_bilm"):
        pretrain(changed, tmp_path / "run", resume=True, show_progress=False)
    pretrain(tiny_config(**{"training.max_steps": 4}), tmp_path / "run", resume=True, show_progress=False)
    assert [r["step"] for r in _metrics(tmp_path / "run") if "loss" in r] == [1, 2, 3, 4]
    assert "max_steps = 4" in (tmp_path / "run" / "config.cfg").read_text()  # the run's true length


def test_a_fresh_run_replaces_an_earlier_runs_metrics(tmp_path):
    pretrain(tiny_config(**{"training.max_steps": 3}), tmp_path / "run", show_progress=False)
    (tmp_path / "run" / "checkpoint" / "state.pt").unlink()  # a run whose checkpoint is gone
    pretrain(tiny_config(**{"training.max_steps": 2}), tmp_path / "run", show_progress=False)
    assert [r["step"] for r in _metrics(tmp_path / "run") if "loss" in r] == [1, 2]


def test_an_empty_dev_corpus_is_refused_before_training(tmp_path):
    (tmp_path / "dev.txt").write_text("\n  \n\n")
    with pytest.raises(CorpusError, match="corpus.dev .*dev.txt holds no tokens"):
        Trainer(tiny_settings(**{"paths.dev": str(tmp_path / "dev.txt")}), tmp_path / "out", show_progress=False)
    with pytest.raises(FileNotFoundError, match="corpus.train: .*gone.txt: no such file or directory"):
        Trainer(tiny_settings(**{"paths.train": str(tmp_path / "gone.txt")}), tmp_path / "out", show_progress=False)


def test_shards_count_lines_across_files_and_a_bom_is_not_a_character(tmp_path):
    for i in range(5):  # five one-line documents: rank 1 of 2 must get two of them
        (tmp_path / f"doc{i}.txt").write_text(f"line {i} .\n", encoding="utf-8")
    files = sorted(tmp_path.glob("doc*.txt"))
    settings = CorpusSettings(max_sequence_length=30)
    shards = [list(SequenceReader(files, settings, rank, 2)) for rank in (0, 1)]
    assert shards == [[["line", "0", "."], ["line", "2", "."], ["line", "4", "."]], [["line", "1", "."], ["line", "3", "."]]]
    (tmp_path / "bom.txt").write_text("hello world .\nhello again .\n", encoding="utf-8-sig")
    assert list(SequenceReader([tmp_path / "bom.txt"], settings))[0] == ["hello", "world", "."]
    vocab = Vocab.from_counts(Counter(["hello", "world"]), 10)
    vocab_file = tmp_path / "vocab.txt"
    vocab.save(vocab_file)
    vocab_file.write_text(vocab_file.read_text(encoding="utf-8"), encoding="utf-8-sig")
    assert Vocab.load(vocab_file).words == vocab.words


@pytest.mark.slow
def test_ctrl_c_on_one_rank_stops_both_at_the_same_step(tmp_path):
    """A stop signal that reaches one torchrun worker only: the ranks agree on it in the next
    step's all-reduce and stop together (a rank that stopped alone hung both)."""
    config_file = tmp_path / "config.cfg"
    tiny_config(**{"training.max_steps": 100000, "training.log_every": 1}).to_disk(config_file)
    # Ctrl-C reaches rank 1 alone, at a known step, however loaded the machine (CTRL_C_AT_STEP).
    driver = tmp_path / "ctrl_c_on_rank_1.py"
    driver.write_text(CTRL_C_AT_STEP.replace("if self.step + 1 == stop_at:", 'if self.step + 1 == stop_at and os.environ["RANK"] == "1":'))
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1", "STOP_AT_STEP": "3"}
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "--standalone", str(driver), "pretrain", str(config_file), str(tmp_path / "ddp"),
    ]  # fmt: skip
    run = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)  # hung forever before
    assert run.returncode != 0  # interrupted, not finished
    state = torch.load(tmp_path / "ddp" / "checkpoint" / "state.pt", weights_only=False)
    assert state["step"] == 3 and len(state["ranks"]) == 2, run.stderr[-3000:]  # both ranks saved together
    assert "Continue it with: torchrun --nproc-per-node 2 -m spacy_elmo pretrain" in run.stderr


WINDOWS = {"corpus.batching": "windows", "corpus.window_length": 6}


def test_windows_are_rows_of_running_text_and_the_backward_rows_read_each_sentence_reversed(tmp_path):
    """bilm-tf's batches: each row runs on through its sentences (<S> w .. </S>), one window
    after another sharing a token (the last target is the next window's first input); the
    backward LM's rows hold the same sentences at the same positions, each read right to left."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c .\nd e .\nf g h i j .\nk .\nl m n .\n" * 3, encoding="utf-8")
    stream = WindowStream([corpus], CorpusSettings(split_sentences=False), rows=2, length=4, buffer_size=100)
    batches = stream.batches()
    windows = [next(batches) for _ in range(6)]
    for row in range(2):
        forward = [w[0][row] for w in windows]
        backward = [w[1][row] for w in windows]
        assert all(len(f) == len(b) == 5 for f, b in zip(forward, backward))
        assert all(a[-1] == b[0] for a, b in zip(forward, forward[1:]))
        assert all(a[-1] == b[0] for a, b in zip(backward, backward[1:]))
        text_forward = [t for f in forward for t in f[:-1]]
        text_backward = [t for b in backward for t in b[:-1]]
        sentences = " ".join(text_forward).replace("</S> <S>", "</S>|<S>").split("|")
        assert len(sentences) >= 3
        start = 0
        for sentence in sentences[:-1]:  # every whole sentence, reversed at the same positions
            tokens = sentence.split()
            assert tokens[0] == "<S>" and tokens[-1] == "</S>"
            assert text_backward[start : start + len(tokens)] == tokens[::-1]
            assert tokens[1:-1] in [line.split() for line in corpus.read_text().splitlines()]
            start += len(tokens)


def test_a_window_stream_resumes_where_it_stood(tmp_path):
    """Its position (epoch, sentences taken, each row's sentence and offset) gives back the
    very windows a stream that went on would give, across an epoch's end."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"w{i} x{i} y{i} .\n" for i in range(12)), encoding="utf-8")

    def stream():
        return WindowStream([corpus], CorpusSettings(split_sentences=False), rows=3, length=5, buffer_size=4, seed=7)

    whole = stream()
    batches = whole.batches()
    first = [next(batches) for _ in range(4)]
    position = whole.position
    rest = [next(batches) for _ in range(6)]  # 5 tokens x 3 rows x 10 > one epoch of 72 tokens
    resumed = list(itertools.islice(stream().batches(DataPosition(**vars(position))), 6))
    assert resumed == rest and first != rest[:4]


def test_window_training_learns_and_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    """Windows carry their LSTM states from batch to batch, so the checkpoint carries them too:
    a resumed run ends bit for bit where a straight one does."""
    config = lambda steps: tiny_config(**WINDOWS, **{**DETERMINISTIC, "training.max_steps": steps})  # noqa: E731
    pretrain(config(6), tmp_path / "straight", show_progress=False)
    pretrain(config(3), tmp_path / "resumed", show_progress=False)
    pretrain(config(6), tmp_path / "resumed", resume=True, show_progress=False)
    a, b = _weights(tmp_path / "straight"), _weights(tmp_path / "resumed")
    for name in a:
        assert torch.equal(a[name], b[name]), name
    losses = [r["loss"] for r in _metrics(tmp_path / "straight") if "loss" in r]
    assert losses == [r["loss"] for r in _metrics(tmp_path / "resumed") if "loss" in r]
    learned = tiny_config(**WINDOWS, **{"training.max_steps": 30, "optimizer.learning_rate": 0.01})
    pretrain(learned, tmp_path / "learned", show_progress=False)
    records = [r["loss"] for r in _metrics(tmp_path / "learned") if "loss" in r]
    assert np.mean(records[-5:]) < np.mean(records[:5]) - 0.5


def test_two_threads_run_the_directions_side_by_side_and_train_as_one(tmp_path, monkeypatch):
    """On two threads each LSTM direction runs its forward and backward on a thread of its own,
    as one autograd node; with each direction's dropout from a generator of its own, the weights
    are those of the one-thread run up to float rounding."""
    from spacy_elmo.nn import side_by_side as engine

    calls = []

    def counting(tasks):
        calls.append(len(tasks))
        return run_side_by_side(tasks)

    monkeypatch.setattr(engine, "run_side_by_side", counting)
    weights = {}
    for threads in (1, 2):
        settings = tiny_settings(**{"system.threads": threads, "objective.softmax": "sampled", "objective.n_negative_samples": 40})
        trainer = Trainer(settings, tmp_path / str(threads), show_progress=False)
        batches = trainer.batches()
        for _ in range(3):
            trainer.train_step(next(batches))
        weights[threads] = trainer.model.state_dict()
    assert calls == [2, 2] * 3  # forward and backward of each step at 2 threads, none at 1
    for name, value in weights[1].items():
        torch.testing.assert_close(weights[2][name], value, rtol=1e-5, atol=1e-6, msg=name)


def test_init_config_prints_the_command_that_trains_it(tmp_path, monkeypatch):
    """The printed command, its placeholders filled in (and, to be quick, the tiny model and 2
    steps appended: later overrides win), trains; the line names the config's own max_steps."""
    from typer.testing import CliRunner

    from spacy_elmo.cli import app

    monkeypatch.chdir(tmp_path)
    written = CliRunner().invoke(app, ["init-config", "bilm.cfg"])
    assert written.exit_code == 0, written.output
    printed = written.output.splitlines()[1].strip()
    assert printed == (
        "python -m spacy_elmo pretrain bilm.cfg OUT_DIR --paths.train TRAIN.txt --paths.dev DEV.txt "
        "--training.max_steps 2000"
    )
    assert "the config's max_steps is 10000" in written.output
    filled = printed.replace("OUT_DIR", "out").replace("TRAIN.txt", TINY["paths.train"]).replace("DEV.txt", TINY["paths.dev"])
    args = shlex.split(filled)[4:] + _cli_overrides(**{"training.max_steps": 2})
    trained = CliRunner().invoke(app, ["pretrain", *args])
    assert trained.exit_code == 0, trained.output
    assert "Pretraining done: 2 steps" in trained.output and (tmp_path / "out" / "model.safetensors").is_file()


def test_a_corpus_unk_is_the_unknown_class_of_a_vocabulary_built_from_it():
    """WikiText writes the words it replaced as <unk>: as a word of its own, the softmax would
    learn it and leave <UNK>, where every other text's rare words fall, with no probability."""
    wikitext_line = "the <unk> of the <unk> river was <unk> ."
    vocab = Vocab.from_counts(Counter(wikitext_line.split()), 100)
    assert "<unk>" not in vocab.words
    ids = vocab.encode(["the", "<unk>", "Tarkovsky"])
    assert ids[2] == ids[3] == vocab.unk
    assert ids[1] == vocab.index["the"] != vocab.unk
