"""``adapt``: a biLM adapted to your own text, on small slices (tests/fixtures/adapt) and few steps."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from typer.testing import CliRunner

from conftest import ELMO_FIXTURE, FIXTURES, TINY_BILM
from spacy_elmo.cli import app
from spacy_elmo.cli.adapt import next_steps
from spacy_elmo.pretrain import load_config, pretrain
from spacy_elmo.pretrain.adapt import ADAPT_CONFIG, adapt, adapt_settings, split_text, step_caps
from spacy_elmo.pretrain.config import ConfigError
from spacy_elmo.pretrain.early_stopping import EarlyStopping
from spacy_elmo.pretrain.metrics import read_metrics
from spacy_elmo.text_files import TextFileError

REPO = Path(__file__).resolve().parents[1]
TWEETS = FIXTURES / "adapt" / "tweets.txt"
LABELLED = FIXTURES / "adapt" / "tweets.jsonl"
WIKITEXT = FIXTURES / "wikitext_tiny"
runner = CliRunner()

#: A few steps of each phase: what the tests check is the route, not the gain.
FEW_STEPS = adapt_settings(
    overrides={"max_steps": 4, "softmax_max_steps": 6, "eval_every": 2, "patience": 1, "batch_tokens": 600, "tokenized": True,
               "min_train_tokens": 2000, "min_heldout_tokens": 300}
)  # fmt: skip


@pytest.fixture(scope="module")
def tiny_source(tmp_path_factory) -> Path:
    """A tiny pretrained biLM with its softmax and vocabulary (a pretraining output directory)."""
    out = tmp_path_factory.mktemp("tiny") / "bilm"
    overrides = {
        "paths.train": str(WIKITEXT / "train.txt"),
        **TINY_BILM,
        "training.batch_tokens": 400,
        "training.max_steps": 3,
        "optimizer.warmup_steps": 0,
    }
    return pretrain(load_config(None, overrides), out, show_progress=False)


def test_the_bundled_model_adapts_to_tweets_and_loads_in_the_pipe(tmp_path):
    """The whole route on the bundled model: a softmax fitted first (it ships none), then the
    biLM, the output loaded by the pipe; the summary says what happened."""
    out = tmp_path / "adapted"
    lines = []
    result = adapt(None, [TWEETS, LABELLED], out, FEW_STEPS, echo=lines.append)
    # the plain text split on whitespace (--tokenized), the JSONL's texts by spaCy's tokenizer
    assert result.softmax_fitted and result.train_tokens + result.heldout_tokens > 7631 + 1660
    assert result.ppl_before > 0 and result.ppl_after > 0 and result.best_step is not None
    summary = json.loads((out / "adapt" / "summary.json").read_text())
    assert summary["ppl_after"] == pytest.approx(result.ppl_after, abs=1e-9)  # srsly writes 10 decimals
    # the whole biLM adapts with the recipe's dropout, from the softmax fitted from zero (its
    # step 0), whose rows of words the text never shows are equal: scored as one
    objective = load_config(out / "config.cfg")["objective"]
    assert objective["dropout"] == FEW_STEPS.dropout and objective["tie_unseen_rows"]
    fit = [r for r in read_metrics(out / "adapt" / "softmax-fit") if "dev_ppl" in r]
    assert fit[0]["step"] == 0 and result.ppl_before == min(r["dev_ppl"] for r in fit) < fit[0]["dev_ppl"]
    # the bundled vocabulary is small enough for a full softmax
    assert (out / "vocab.txt").read_text(encoding="utf-8").count("\n") <= FEW_STEPS.full_softmax_max_words
    assert objective["softmax"] == "full"
    words = len((out / "vocab.txt").read_text(encoding="utf-8").splitlines())
    assert sum(f"full softmax over {words:,} words" in line for line in lines) == 2  # both steps say so
    for name in ("options.json", "model.safetensors", "softmax.safetensors", "vocab.txt"):
        assert (out / name).is_file(), name
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"@architectures": "spacy_elmo.ElmoModel.v2", "weights": str(out)}})
    nlp.initialize()
    assert nlp("Adapted to tweets").tensor.shape[0] == 3


def test_the_command_prints_before_after_and_the_next_step_and_resumes(tmp_path, tiny_source):
    """A source with a softmax is evaluated as it is (no fit); --resume on a finished adaptation
    trains nothing more; a second run into the same directory is refused."""
    out = tmp_path / "adapted"
    args = ["adapt", str(tiny_source), str(TWEETS), str(out), "--tokenized", "--holdout", "0.2", "--max-steps", "4", "--eval-every", "2", "--patience", "1", "--dropout", "0.2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert load_config(out / "config.cfg")["objective"]["dropout"] == 0.2
    assert "Held-out perplexity:" in result.output and "before" in result.output
    assert all(line in result.output for line in next_steps(out))  # tests/test_printed_commands.py parses them
    assert not (out / "adapt" / "softmax-fit").exists()
    metrics = (out / "metrics.jsonl").read_text()
    resumed = runner.invoke(app, [*args, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert (out / "metrics.jsonl").read_text().count("dev_ppl") == metrics.count("dev_ppl")
    again = runner.invoke(app, args)
    assert again.exit_code == 1 and "--resume" in again.output


def test_the_step_caps_follow_the_amount_of_text(tmp_path, tiny_source):
    """Unset caps: a small text gets the floors, a larger one proportionally more updates (the same
    passes over it), a cap given wins; adapt runs with the caps of its training text."""
    defaults = adapt_settings()
    small = step_caps(defaults, defaults.batch_tokens)
    assert (small.max_steps, small.softmax_max_steps) == (defaults.min_steps, defaults.softmax_min_steps)
    large = step_caps(defaults, 100 * defaults.min_steps * defaults.batch_tokens)
    larger = step_caps(defaults, 200 * defaults.min_steps * defaults.batch_tokens)
    assert defaults.min_steps < large.max_steps and defaults.softmax_min_steps < large.softmax_max_steps
    assert (larger.max_steps, larger.softmax_max_steps) == (2 * large.max_steps, 2 * large.softmax_max_steps)
    given = step_caps(defaults.model_copy(update=dict(max_steps=7, softmax_max_steps=9)), large.max_steps * 10**4)
    assert (given.max_steps, given.softmax_max_steps) == (7, 9)
    settings = FEW_STEPS.model_copy(update=dict(max_steps=None, passes=0.5, min_steps=1))
    result = adapt(str(tiny_source), [TWEETS], tmp_path / "out", settings, echo=lambda line: None)
    steps = step_caps(settings, result.train_tokens).max_steps
    assert steps > 1 and load_config(tmp_path / "out" / "config.cfg")["training"]["max_steps"] == steps


def test_early_stopping_keeps_the_best_evaluation():
    stopping = EarlyStopping(patience=2)
    assert stopping.update(10, 100.0) and not stopping.update(20, 101.0)
    assert not stopping.exhausted and stopping.update(30, 90.0)
    assert not stopping.update(40, 95.0) and not stopping.update(50, 91.0)
    assert stopping.exhausted and (stopping.best_step, stopping.best) == (30, 90.0)


def test_a_run_with_patience_stops_and_keeps_its_best_evaluation(tmp_path):
    """[training] patience in any pretraining run: a learning rate that wrecks the model stops it
    early, and its model files are those of the best evaluation (the same as a run that ended
    there: constant schedule, one thread, same seed)."""
    tiny = {
        "paths.train": str(WIKITEXT / "train.txt"), "paths.dev": str(WIKITEXT / "valid.txt"),
        "model.filters": [[1, 8], [2, 8]], "model.char_embedding_dim": 4, "model.lstm_dim": 16,
        "model.projection_dim": 8, "vocab.size": 300, "corpus.max_sequence_length": 30,
        "training.batch_tokens": 400, "optimizer.warmup_steps": 0, "optimizer.schedule": "constant",
        "optimizer.learning_rate": 0.05, "training.eval_every": 2, "training.checkpoint_every": 3,
    }  # fmt: skip
    stopped = pretrain(load_config(None, {**tiny, "training.max_steps": 40, "training.patience": 2}), tmp_path / "a", show_progress=False)
    records = [json.loads(line) for line in (stopped / "metrics.jsonl").read_text().splitlines()]
    stop = next(r for r in records if r.get("early_stop"))
    assert stop["step"] < 40 and stop["step"] == stop["best_step"] + 4
    best = pretrain(load_config(None, {**tiny, "training.max_steps": stop["best_step"]}), tmp_path / "b", show_progress=False)
    for name in ("model.safetensors", "softmax.safetensors"):
        assert (stopped / name).read_bytes() == (best / name).read_bytes(), name


@pytest.mark.parametrize(
    "content, message",
    [
        (b"one line of text\n", "too little text to adapt on"),
        (b"caf\xe9 au lait\n" * 2000, "line 1: not UTF-8"),
    ],
)
def test_text_that_cannot_work_is_refused_naming_the_file(tmp_path, content, message):
    bad = tmp_path / "mine.txt"
    bad.write_bytes(content)
    result = runner.invoke(app, ["adapt", "en_wikitext_small", str(bad), str(tmp_path / "out")])
    assert result.exit_code == 1
    assert message in result.output and str(bad) in result.output


def test_bad_jsonl_and_missing_files_are_refused(tmp_path):
    bad = tmp_path / "labelled.jsonl"
    bad.write_text('{"text": "fine"}\n{"label": "POS"}\n', encoding="utf-8")
    with pytest.raises(TextFileError, match=r"labelled.jsonl, line 2: no text; each line must be a JSON object"):
        split_text([bad], tmp_path / "t.txt", tmp_path / "h.txt", adapt_settings())
    result = runner.invoke(app, ["adapt", "en_wikitext_small", str(tmp_path / "nowhere.txt"), str(tmp_path / "out")])
    assert result.exit_code == 1 and "nowhere.txt: no such file" in result.output
    result = runner.invoke(app, ["adapt", str(tmp_path / "no_model"), str(TWEETS), str(tmp_path / "out")])
    assert result.exit_code == 1 and "SOURCE" in result.output


def test_an_elmoformanylangs_model_is_refused_before_any_work_by_adapt_and_pretrain(tmp_path):
    """Its tokens go through its own lexicons; pretraining feeds bytes. Without the check the
    error blamed its config.json ("missing section 'char_cnn'") after the text was split."""
    manylangs = FIXTURES / "manylangs_tiny"
    result = runner.invoke(app, ["adapt", str(manylangs), str(TWEETS), str(tmp_path / "out")])
    assert result.exit_code == 1
    assert f"SOURCE {manylangs}: an ELMoForManyLangs model" in result.output
    assert "pretrain one on your language's text" in result.output
    assert not (tmp_path / "out").exists()
    overrides = {"paths.train": str(WIKITEXT / "train.txt"), **TINY_BILM, "paths.init_bilm": str(manylangs)}
    with pytest.raises(ValueError, match="initialize.bilm .*an ELMoForManyLangs model"):
        pretrain(load_config(None, overrides), tmp_path / "pretrained", show_progress=False)


def test_a_folder_stands_for_its_text_spacy_and_jsonl_files_in_sorted_order(tmp_path):
    """A pile of in-domain text is a folder: its files (nested ones too) are read as if each was
    named, in sorted order; other files are left out; an empty folder is refused, named."""
    pile = tmp_path / "pile"
    (pile / "b").mkdir(parents=True)
    lines = TWEETS.read_text(encoding="utf-8").splitlines()
    (pile / "a.txt").write_text("\n".join(lines[: len(lines) // 2]) + "\n", encoding="utf-8")
    (pile / "b" / "c.txt").write_text("\n".join(lines[len(lines) // 2 :]) + "\n", encoding="utf-8")
    (pile / "b" / "labelled.jsonl").write_text(LABELLED.read_text(encoding="utf-8"), encoding="utf-8")
    (pile / "notes.md").write_text("not read\n", encoding="utf-8")
    named = [pile / "a.txt", pile / "b" / "c.txt", pile / "b" / "labelled.jsonl"]
    settings = adapt_settings(overrides={"tokenized": True})
    assert split_text([pile], tmp_path / "t1", tmp_path / "h1", settings) == split_text(named, tmp_path / "t2", tmp_path / "h2", settings)
    assert (tmp_path / "t1").read_text() == (tmp_path / "t2").read_text() and (tmp_path / "t1").read_text()
    assert "not read" not in (tmp_path / "t1").read_text() + (tmp_path / "h1").read_text()
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty: the directory holds no \.txt"):
        split_text([tmp_path / "empty"], tmp_path / "t3", tmp_path / "h3", settings)


@pytest.mark.parametrize(
    "option, value, key", [("--dropout", "1.5", "dropout"), ("--holdout", "0.9", "holdout"),
                           ("--learning-rate", "-0.1", "learning_rate"), ("--eval-every", "0", "eval_every")]
)  # fmt: skip
def test_a_setting_out_of_range_is_refused_naming_the_key_before_any_work(tmp_path, option, value, key):
    """An option sets the recipe's key of its name, validated with the recipe (one wording)."""
    result = runner.invoke(app, ["adapt", "en_wikitext_small", str(TWEETS), str(tmp_path / "out"), option, value])
    assert result.exit_code == 1
    assert f"adapt.{key} must be" in result.output and f"got {value}" in result.output
    assert not (tmp_path / "out").exists()


def test_a_recipe_of_your_own_is_read_and_its_bad_keys_named(tmp_path):
    """--config: a copy of the package's recipe with values of your own; the options given
    still override it; a key it does not know, or a bad value, is named with the file."""
    mine = tmp_path / "mine.cfg"
    mine.write_text(ADAPT_CONFIG.read_text(encoding="utf-8").replace("holdout = 0.1", "holdout = 0.2"), encoding="utf-8")
    assert adapt_settings(mine).holdout == 0.2 and adapt_settings(mine, {"holdout": 0.3}).holdout == 0.3
    mine.write_text(ADAPT_CONFIG.read_text(encoding="utf-8") + "holdot = 0.2\n", encoding="utf-8")
    result = runner.invoke(app, ["adapt", "en_wikitext_small", str(TWEETS), str(tmp_path / "out"), "--config", str(mine)])
    assert result.exit_code == 1 and str(mine) in result.output and "holdot" in result.output
    with pytest.raises(ConfigError, match="nowhere.cfg: no such adapt recipe"):
        adapt_settings(tmp_path / "nowhere.cfg")


def test_the_held_out_share_is_seeded_and_capped(tmp_path):
    settings = adapt_settings(overrides={"holdout": 0.2, "max_heldout_tokens": 800, "tokenized": True, "min_heldout_tokens": 1, "min_train_tokens": 1})
    first = split_text([TWEETS], tmp_path / "a.txt", tmp_path / "ha.txt", settings)
    second = split_text([TWEETS], tmp_path / "b.txt", tmp_path / "hb.txt", settings)
    assert first == second and (tmp_path / "ha.txt").read_text() == (tmp_path / "hb.txt").read_text()
    assert sum(first) == 7631 and 800 <= first[1] < 800 + 100


def test_a_released_model_without_vocabulary_gets_one_from_the_text(tmp_path):
    """A released model (bilm-tf files, no softmax, no vocab.txt): the softmax is fitted over the
    text's own words; the output is a native pretraining directory."""
    released = tmp_path / "released"
    released.mkdir()
    (released / "options.json").write_bytes((ELMO_FIXTURE / "options.json").read_bytes())
    (released / "weights.hdf5").write_bytes((ELMO_FIXTURE / "lm_weights.hdf5").read_bytes())
    lines = []
    # a vocabulary over the full softmax's limit: the whole biLM's step samples (the released
    # models' case)
    settings = FEW_STEPS.model_copy(update=dict(full_softmax_max_words=1000, n_negative_samples=64))
    result = adapt(str(released), [TWEETS], tmp_path / "out", settings, echo=lines.append)
    assert result.softmax_fitted and any("has no vocabulary" in line for line in lines)
    words = (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert words[:3] == ["<S>", "</S>", "<UNK>"] and "@paulwalk" not in words[:3] and len(words) > 1000
    objective = load_config(tmp_path / "out" / "config.cfg")["objective"]
    assert (objective["softmax"], objective["n_negative_samples"], objective["tie_unseen_rows"]) == ("sampled", 64, False)
    assert (tmp_path / "out" / "model.safetensors").is_file()


def test_the_command_caps_both_steps(tmp_path):
    """--softmax-max-steps caps the softmax fit as --max-steps caps the whole biLM: a try-out run
    on a large text is not an hour of fitting the softmax first."""
    released = tmp_path / "released"
    released.mkdir()
    (released / "options.json").write_bytes((ELMO_FIXTURE / "options.json").read_bytes())
    (released / "weights.hdf5").write_bytes((ELMO_FIXTURE / "lm_weights.hdf5").read_bytes())
    out = tmp_path / "out"
    result = runner.invoke(app, [
        "adapt", str(released), str(TWEETS), str(out), "--tokenized", "--holdout", "0.2",
        "--max-steps", "2", "--softmax-max-steps", "4", "--eval-every", "1", "--patience", "9",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    steps = lambda run: [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]  # noqa: E731
    assert max(steps(out / "adapt" / "softmax-fit")) == 4 and max(steps(out)) == 2


def test_an_adaptation_that_beats_no_evaluation_leaves_the_source_biLM(tmp_path):
    """A learning rate that wrecks the biLM: no evaluation beats the fitted source, so the output
    holds the source biLM and the fitted softmax, unchanged (an adaptation never leaves a worse
    biLM; on 15k tokens of tweets this happened with the defaults, docs/results/adapt.md)."""
    released = tmp_path / "released"
    released.mkdir()
    (released / "options.json").write_bytes((ELMO_FIXTURE / "options.json").read_bytes())
    (released / "weights.hdf5").write_bytes((ELMO_FIXTURE / "lm_weights.hdf5").read_bytes())
    settings = FEW_STEPS.model_copy(update=dict(learning_rate=5.0))
    result = adapt(str(released), [TWEETS], tmp_path / "out", settings, echo=lambda line: None)
    assert result.kept_source and result.ppl_after == result.ppl_before
    fit = tmp_path / "out" / "adapt" / "softmax-fit"
    for name in ("model.safetensors", "softmax.safetensors"):
        assert (tmp_path / "out" / name).read_bytes() == (fit / name).read_bytes(), name


def test_a_softmax_cap_below_one_pass_is_refused_and_leaves_nothing(tmp_path):
    """A softmax fit capped below one pass over the training text would make a "before" fitted
    part way (and the change credit the adaptation with the rest): refused, naming the cap that
    works; the output directory the run made is gone."""
    out = tmp_path / "out"
    result = runner.invoke(app, ["adapt", "en_wikitext_small", str(TWEETS), str(out), "--tokenized", "--holdout", "0.2", "--softmax-max-steps", "1"])
    assert result.exit_code == 1
    assert "adapt.softmax_max_steps = 1 is too few to fit a softmax to 6,229 training tokens" in result.output
    assert "give at least 4 (--softmax-max-steps)" in result.output
    assert not out.exists()


@pytest.mark.parametrize("lines, advice", [(["a few words only"], None), (["twenty words " * 10] * 60, "--holdout 0.5")])
def test_the_holdout_advice_comes_only_where_a_share_helps(tmp_path, lines, advice):
    """Too little text: the refusal suggests a larger --holdout only when one would give both
    parts their minimum (1,200 tokens here: a 0.5 share does; 4 tokens: none does)."""
    text = tmp_path / "mine.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["adapt", "en_wikitext_small", str(text), str(tmp_path / "out"), "--tokenized", "--config", str(_small_recipe(tmp_path))])
    assert result.exit_code == 1 and "too little text to adapt on" in result.output
    assert ("--holdout" in result.output) == (advice is not None)
    if advice:
        assert advice in result.output
    assert not (tmp_path / "out").exists()


def _small_recipe(tmp_path: Path) -> Path:
    """The package's recipe with minimums a small text can meet (500 held out, 500 to train)."""
    recipe = tmp_path / "small.cfg"
    text = ADAPT_CONFIG.read_text(encoding="utf-8").replace("min_heldout_tokens = 1000", "min_heldout_tokens = 500")
    recipe.write_text(text.replace("min_train_tokens = 4000", "min_train_tokens = 500"), encoding="utf-8")
    return recipe


def test_an_output_directory_that_is_not_this_runs_is_refused(tmp_path):
    """A folder of other files (the data folder, say) is refused, named, and left as it was; so
    is --resume where no adaptation ran. An empty folder is used, and a failed run empties it."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.txt").write_text("mine\n", encoding="utf-8")
    result = runner.invoke(app, ["adapt", "en_wikitext_small", str(TWEETS), str(data), "--tokenized"])
    assert result.exit_code == 1 and f"{data} is not empty and holds no adaptation" in " ".join(result.output.split())
    assert sorted(p.name for p in data.iterdir()) == ["notes.txt"]
    result = runner.invoke(app, ["adapt", "en_wikitext_small", str(TWEETS), str(tmp_path / "new"), "--resume"])
    assert result.exit_code == 1 and "no adaptation to resume" in result.output and not (tmp_path / "new").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(app, ["adapt", "en_wikitext_small", str(TWEETS), str(empty), "--tokenized", "--softmax-max-steps", "1"])
    assert result.exit_code == 1 and empty.is_dir() and not any(empty.iterdir())  # no adapt/train.txt left


def test_the_progress_bars_name_each_phase_and_show_the_evaluation_just_made(tmp_path, capsys):
    """Each phase's bar has its own name (not "pretrain"), and its last held-out perplexity is
    the last evaluation's, not the one before."""
    out = tmp_path / "out"
    adapt(None, [TWEETS], out, FEW_STEPS, echo=lambda line: None)
    bars = capsys.readouterr().err.replace("\r", "\n").splitlines()
    assert not [line for line in bars if line.startswith("pretrain")]
    for label, run in (("softmax fit", out / "adapt" / "softmax-fit"), ("whole biLM", out)):
        shown = [re.search(r"dev_ppl=([0-9.]+)", line) for line in bars if line.startswith(f"{label}:")]
        last = [r["dev_ppl"] for r in read_metrics(run) if "dev_ppl" in r][-1]
        assert [m for m in shown if m][-1].group(1) == f"{last:.1f}", label


CTRL_C_AT_STEP = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal (pytest may ignore it)
from spacy_elmo.pretrain.trainer import Trainer
train_step = Trainer.train_step
def ctrl_c_then_step(self, batch):
    if self.step + 1 == 3:
        os.kill(os.getpid(), signal.SIGINT)
    return train_step(self, batch)
Trainer.train_step = ctrl_c_then_step
from spacy_elmo.cli import main
sys.argv[0] = "spacy_elmo"
main()
"""


def test_ctrl_c_prints_a_resume_line_that_finishes_the_run_and_counts_all_of_it(tmp_path, tiny_source):
    """Ctrl-C (a real SIGINT, at the third update) prints the command that continues; run as
    printed, it finishes the run, and its final line counts every update and the first
    session's time too."""
    out = tmp_path / "out"
    args = ["adapt", str(tiny_source), str(TWEETS), str(out), "--tokenized", "--holdout", "0.2", "--max-steps", "6", "--eval-every", "2", "--patience", "9"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    stopped = subprocess.run([sys.executable, "-c", CTRL_C_AT_STEP, *args], env=env, capture_output=True, text=True, timeout=300)
    assert stopped.returncode == 130, stopped.stderr
    command = stopped.stderr.split("Continue it with: ")[1].splitlines()[0]
    assert command.startswith("python -m spacy_elmo adapt ") and command.endswith(" --resume")
    first_session = json.loads((out / "adapt" / "seconds.json").read_text())["seconds"]
    words = shlex.split(command)
    resumed = subprocess.run([sys.executable, *words[1:]], env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "; 6 updates of the whole biLM" in resumed.stdout
    assert json.loads((out / "adapt" / "summary.json").read_text())["seconds"] > first_session > 0
