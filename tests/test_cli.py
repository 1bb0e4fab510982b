"""``python -m spacy_elmo``: convert, embed and demo, run in-process with typer's CliRunner."""

import json
import re

import h5py
import numpy as np
import pytest
import spacy
import torch
import typer
from spacy.tokens import Doc, DocBin
from typer.testing import CliRunner

from benchmarks.cli import app as kit_app
from conftest import cli_commands
from spacy_elmo import batch_to_ids, load_bilm
from spacy_elmo.cli import app
from spacy_elmo.cli.demo import demo_words
from spacy_elmo.cli.senses import DATA_FILE, read_senses

runner = CliRunner()


def _layers(bilm, words):
    with torch.no_grad():
        return bilm(torch.from_numpy(batch_to_ids([words])))[0][:, 0].numpy()


def _fixture_args(fixture_files):
    return ["--options-file", str(fixture_files[0]), "--weight-file", str(fixture_files[1])]


def test_convert_released_to_native_and_back(tmp_path, fixture_files, fixture_bilm):
    result = runner.invoke(app, ["convert", str(fixture_files[1]), str(tmp_path / "native")])
    assert result.exit_code == 0, result.output
    assert "(bilm-tf) ->" in result.output and "(native)" in result.output
    assert (tmp_path / "native" / "model.safetensors").is_file()
    result = runner.invoke(app, ["convert", str(tmp_path / "native"), str(tmp_path / "released")])
    assert result.exit_code == 0, result.output
    words = ["Round", "trip", "."]
    for converted in (load_bilm(tmp_path / "native"), load_bilm(tmp_path / "released")):
        np.testing.assert_array_equal(_layers(converted, words), _layers(fixture_bilm, words))
    with h5py.File(tmp_path / "released" / "weights.hdf5", "r") as f:
        assert f["RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"].shape == (32, 256)


def test_convert_names_a_missing_file(tmp_path, fixture_files):
    result = runner.invoke(app, ["convert", str(tmp_path / "missing.hdf5"), str(tmp_path / "out")])
    assert result.exit_code == 1
    assert f"SOURCE {tmp_path / 'missing.hdf5'} does not exist" in result.output
    args = ["convert", str(tmp_path / "missing.hdf5"), str(tmp_path / "out"), "--options-file", str(fixture_files[0])]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert f"weight file not found: {tmp_path / 'missing.hdf5'}" in result.output
    assert not (tmp_path / "out").exists()


def test_embed_text_file_in_allennlp_layout(tmp_path, fixture_files, fixture_bilm):
    lines = ["The bank of the river .", "", "She went to   the bank ."]
    (tmp_path / "input.txt").write_text("\n".join(lines) + "\n")
    args = [str(tmp_path / "input.txt"), str(tmp_path / "out.hdf5"), "--metrics", str(tmp_path / "run.json")]
    result = runner.invoke(app, ["embed", *args, *_fixture_args(fixture_files)])
    assert result.exit_code == 0, result.output
    figures = json.loads((tmp_path / "run.json").read_text())
    tokens = sum(len(line.split()) for line in lines)
    assert (figures["sentences"], figures["tokens"], figures["embedded_tokens"], figures["processes"]) == (3, tokens, tokens, 1)
    assert figures["embed_seconds"] > 0 and figures["merge_seconds"] >= 0
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        assert sorted(f.keys()) == ["0", "1", "2", "sentence_to_index"]
        for key, line in enumerate(lines):
            words = line.split()
            assert f[str(key)].shape == (3, len(words), 32)
            if words:
                np.testing.assert_allclose(f[str(key)][()], _layers(fixture_bilm, words), atol=1e-6)
        index = json.loads(f["sentence_to_index"][0])
    assert index["The bank of the river ."] == "0"
    assert index["She went to   the bank ."] == "2"  # the stripped line, as AllenNLP keys it
    assert len(index) == 3


def test_embed_refuses_an_output_folder_that_does_not_exist(tmp_path, fixture_files):
    (tmp_path / "input.txt").write_text("a b\n")
    out = tmp_path / "missing" / "out.hdf5"
    result = runner.invoke(app, ["embed", str(tmp_path / "input.txt"), str(out), *_fixture_args(fixture_files)])
    assert result.exit_code == 1
    assert f"cannot write {out}: the folder {out.parent} does not exist" in result.output


@pytest.mark.parametrize("layers,shape", [("top", (6, 32)), ("average", (6, 32))])
def test_embed_top_and_average(tmp_path, fixture_files, fixture_bilm, layers, shape):
    words = "The bank of the river .".split()
    (tmp_path / "input.txt").write_text(" ".join(words) + "\n")
    args = ["embed", str(tmp_path / "input.txt"), str(tmp_path / "out.hdf5"), "--layers", layers, "--forget-sentences"]
    result = runner.invoke(app, args + _fixture_args(fixture_files))
    assert result.exit_code == 0, result.output
    expected = _layers(fixture_bilm, words)
    expected = expected[-1] if layers == "top" else expected.mean(axis=0)
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        assert "sentence_to_index" not in f
        assert f["0"].shape == shape
        np.testing.assert_allclose(f["0"][()], expected, atol=1e-6)


def test_embed_spacy_file_one_dataset_per_sentence(tmp_path, fixture_files, fixture_bilm):
    vocab = spacy.blank("en").vocab
    with_sentences = Doc(vocab, words="One sentence . And another".split(), sent_starts=[1, 0, 0, 1, 0])
    without = Doc(vocab, words="No boundaries here".split())
    DocBin(docs=[with_sentences, without]).to_disk(tmp_path / "docs.spacy")
    result = runner.invoke(app, ["embed", str(tmp_path / "docs.spacy"), str(tmp_path / "out.hdf5"), *_fixture_args(fixture_files)])
    assert result.exit_code == 0, result.output
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        expected = [["One", "sentence", "."], ["And", "another"], ["No", "boundaries", "here"]]
        for key, words in enumerate(expected):
            np.testing.assert_allclose(f[str(key)][()], _layers(fixture_bilm, words), atol=1e-6)
        assert json.loads(f["sentence_to_index"][0])["And another"] == "1"


def test_embed_on_a_gpu_that_is_not_there(tmp_path, fixture_files):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    (tmp_path / "input.txt").write_text("a b\n")
    args = ["embed", str(tmp_path / "input.txt"), str(tmp_path / "out.hdf5"), "--gpu-id", "0"]
    result = runner.invoke(app, args + _fixture_args(fixture_files))
    assert result.exit_code == 1
    assert "--gpu-id 0: cannot run on the GPU" in result.output
    assert not (tmp_path / "out.hdf5").exists()


def test_embed_names_a_missing_weight_file(tmp_path, fixture_files):
    (tmp_path / "input.txt").write_text("a b\n")
    args = ["embed", str(tmp_path / "input.txt"), str(tmp_path / "out.hdf5"),
            "--options-file", str(fixture_files[0]), "--weight-file", str(tmp_path / "gone.hdf5")]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert "gone.hdf5" in result.output


def _demo_table(output):
    """The demo's table rows as dicts (columns are separated by two or more spaces)."""
    lines = output.split("wins = own is higher.\n")[1].split("\n\n")[0].splitlines()
    keys = ["word", "sense", "token_own", "token_other", "token_wins",
            "context_own", "context_other", "context_wins", "query"]
    return [dict(zip(keys, re.split(r"\s{2,}", line.strip()))) for line in lines[2:]]


def _demo_counts(output):
    """(label, in-context wins, token-layer wins, queries) of each summary line."""
    pattern = r"Right sense wins for (.+?): in context (\d+) of (\d+) queries, token layer (\d+) of (\d+)"
    counts = []
    for label, context, n, token, n_again in re.findall(pattern, output):
        assert n == n_again
        counts.append((label, int(context), int(token), int(n)))
    return counts


def test_demo_scores_each_sense_of_the_words_whose_part_of_speech_differs(fixture_files):
    result = runner.invoke(app, ["demo", *_fixture_args(fixture_files)])
    assert result.exit_code == 0, result.output
    sentences = read_senses(DATA_FILE)
    words = demo_words(sentences)
    rows = _demo_table(result.output)
    # One row per sense of each chosen word: the first sentence of that sense in the data.
    expected = list(dict.fromkeys((s.word, s.sense) for s in sentences if s.word in words))
    assert [(row["word"], row["sense"]) for row in rows] == expected
    for row in rows:
        for key in ("token_own", "token_other", "context_own", "context_other"):
            assert -1.0 <= float(row[key]) <= 1.0, row
        # The token layer is context-free: one vector per word, every cosine 1 and a tie.
        assert float(row["token_own"]) == float(row["token_other"]) == 1.0
        assert row["token_wins"] == "tie"
        assert row["context_wins"] in ("yes", "no", "tie")
        won = float(row["context_own"]) > float(row["context_other"])
        assert row["context_wins"] == ("yes" if won else "no") or row["context_wins"] == "tie"
        assert f"[{row['word']}]" in row["query"]
    (shown, context, token, n), (same_pos, _, same_token, same_n) = _demo_counts(result.output)
    assert n == sum(s.word in words for s in sentences)  # every sentence of the words, in turn
    assert same_n == len(sentences) - n  # the other words share one part of speech
    assert 0 <= context <= n and token == 0 and same_token == 0
    # Weights given: no advice to download a larger model.
    assert "download" not in result.output


def test_demo_runs_on_the_bundled_model():
    """The README's main command: the model that ships with the package, no options. Its
    contextual vectors pick the right sense more often than guessing would; the token layer never
    does (it ties)."""
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    assert "ELMo: 3 layers of width 256" in result.output
    (_, context, token, n), _ = _demo_counts(result.output)
    assert context > n / 2 and token == 0
    assert "python -m spacy_elmo download original" in result.output


def test_demo_words_and_own_queries(fixture_files):
    query = "They walked along the bank and watched the river flow past ."
    args = ["demo", "--word", "bank", "--word", "crane", "--query", query, *_fixture_args(fixture_files)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert {row["word"] for row in _demo_table(result.output)} == {"bank", "crane"}
    assert "Query: They walked along the [bank] and watched" in result.output
    line = next(x for x in result.output.splitlines() if x.strip().startswith("in context:"))
    assert "river" in line and "money" in line


@pytest.mark.parametrize(
    "args, message",
    [(["--word", "banks"], "--word banks: not in senses.jsonl"),
     (["--query", "No ambiguous word here."], "contains none of the sense data's words")],
    ids=["unknown-word", "query-without-a-word"],
)
def test_demo_refuses_what_it_cannot_score(fixture_files, args, message, monkeypatch):
    """Refused before the sense data is embedded and before anything is printed."""

    def embed_sentences(*args):
        raise AssertionError("the sense data was embedded before the options were checked")

    monkeypatch.setattr("spacy_elmo.cli.demo.embed_sentences", embed_sentences)
    result = runner.invoke(app, ["demo", *args, *_fixture_args(fixture_files)])
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and message in result.output


def test_demo_runs_with_the_int8_cpu_path():
    """--precision reaches the pipe's model block: the demo's scores in int8 on the bundled
    model, and the same verdict as float32 (the token layer still ties)."""
    result = runner.invoke(app, ["demo", "--precision", "int8"])
    assert result.exit_code == 0, result.output
    assert "precision int8" in result.output
    (_, context, token, n), _ = _demo_counts(result.output)
    assert context > n / 2 and token == 0


def test_demo_and_embed_refuse_an_unknown_precision(tmp_path):
    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    for args in (["demo"], ["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5")]):
        result = runner.invoke(app, [*args, "--precision", "int4"])
        assert result.exit_code == 2, result.output
        assert "--precision must be one of" in result.output and "int4" in result.output


def test_demo_without_the_bundled_model_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setattr("spacy_elmo.sources.DEFAULT_MODEL", tmp_path / "en_wikitext_small")
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 1
    assert "en_wikitext_small is not in this installation" in result.output and "download small" in result.output


def test_pretraining_commands_are_in_spacys_cli(tmp_path):
    """The ``spacy_cli`` entry point puts elmo-pretrain and elmo-init-config into
    ``python -m spacy`` (run from elsewhere than the checkout, as users do)."""
    import subprocess
    import sys

    from spacy_elmo.pretrain.config import DEFAULT_CONFIG

    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "spacy", *args], cwd=tmp_path, capture_output=True, text=True
    )
    listing = run("--help")
    assert "elmo-pretrain" in listing.stdout and "elmo-init-config" in listing.stdout, listing.stderr
    written = run("elmo-init-config", str(tmp_path / "pretrain.cfg"))
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "pretrain.cfg").read_text() == DEFAULT_CONFIG.lstrip("\n")
    assert run("elmo-pretrain", "--help").returncode == 0


def _threads_options(root=None, prefix=()):
    """(command path, option) of every --threads option of the CLI (or of ``root``, a click
    command, under ``prefix``), sub-apps included."""
    return [
        (path, param)
        for path, command in cli_commands(root, prefix)
        for param in command.params
        if "--threads" in getattr(param, "opts", ())
    ]


#: The package's commands and the checkout's measurement kit (``python -m benchmarks``).
THREADS_OPTIONS = _threads_options() + _threads_options(typer.main.get_command(kit_app), ("benchmarks",))


@pytest.mark.parametrize(
    "path, option", THREADS_OPTIONS, ids=[" ".join(path) for path, _ in THREADS_OPTIONS]
)
def test_every_threads_option_takes_an_integer_of_at_least_1(path, option):
    """One rule for --threads (pretrain, embed, demo, bench ...): 0 (or less) is refused, naming
    the option; 1 is taken."""
    ctx = typer.Context(typer.main.get_command(app), info_name=path[-1])
    for refused in ("0", "-1"):
        with pytest.raises(typer.BadParameter) as err:
            option.process_value(ctx, refused)
        message = err.value.format_message()
        assert "'--threads'" in message
        assert "greater than or equal to 1" in message or "x>=1" in message
    assert option.process_value(ctx, "1") in (1, [1])  # bench and benchmarks inference take a list: 1,2


def test_config_overrides_read_as_spacys_commands_read_them():
    """``--section.key value`` and ``--section.key=value``; JSON values parse, others stay
    strings; a key alone is true."""
    from spacy_elmo.cli.pretrain import config_overrides

    args = ["--training.max_steps", "500", "--corpus.batching=windows", "--model.cell_clip", "null",
            "--paths.train", "my corpus.txt", "--model.filters", "[[1, 4]]", "--x.flag"]  # fmt: skip
    assert config_overrides(args) == {
        "training.max_steps": 500, "corpus.batching": "windows", "model.cell_clip": None,
        "paths.train": "my corpus.txt", "model.filters": [[1, 4]], "x.flag": True,
    }  # fmt: skip


@pytest.mark.parametrize(
    "extra, named", [(["--max_steps", "5"], "--max_steps"), (["training.max_steps", "5"], "training.max_steps")]
)
def test_pretrain_refuses_an_override_it_cannot_read_naming_it(tmp_path, extra, named):
    from spacy_elmo.pretrain.config import DEFAULT_CONFIG

    config = tmp_path / "pretrain.cfg"
    config.write_text(DEFAULT_CONFIG, encoding="utf-8")
    result = runner.invoke(app, ["pretrain", str(config), str(tmp_path / "out"), *extra])
    assert result.exit_code != 0
    assert f"config override '{named}'" in " ".join(result.output.split()), result.output
    assert not (tmp_path / "out").exists()


def test_pretrain_refuses_threads_0_naming_the_option(tmp_path):
    from spacy_elmo.pretrain.config import DEFAULT_CONFIG

    config = tmp_path / "pretrain.cfg"
    config.write_text(DEFAULT_CONFIG, encoding="utf-8")
    result = runner.invoke(app, ["pretrain", str(config), str(tmp_path / "out"), "--threads", "0"])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.replace("│", " ").split())  # rich's error box, unwrapped
    assert "Invalid value for '--threads'" in message
    assert "greater than or equal to 1" in message or "x>=1" in message
    assert not (tmp_path / "out").exists()
    assert ("pretrain",) in [path for path, _ in THREADS_OPTIONS]


@pytest.mark.parametrize(
    "command, says, never",
    [
        (["pretrain"], "torchrun --nproc-per-node N -m spacy_elmo pretrain", "nproc_per_node"),
        (["init-config"], "--model <str> Continue pretraining this biLM: a model directory", "--model <path>"),
    ],
    ids=["pretrain", "init-config"],
)
def test_help_speaks_to_users(command, says, never):
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert says in text and never not in text, text
