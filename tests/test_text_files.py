"""One reader of the user's text (``spacy_elmo.text_files``) behind every command that reads it: the
same three bad inputs (a Latin-1 byte, a line that is not JSON, a line without text, each on line 3)
get the same one-line refusal, naming the file and line, from ``adapt``, ``pretrain``, ``embed``,
``convert-textcat``, ``config`` and the ``spacy_elmo.TextCatCorpus.v1`` reader inside ``spacy
train``, before any work is done.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest
from spacy.cli.init_config import init_config
from spacy.util import registry
from thinc.api import ConfigValidationError
from typer.testing import CliRunner

from benchmarks.subprocesses import subprocess_env
from spacy_elmo.cli import app
from spacy_elmo.pretrain.config import CONFIGS
from spacy_elmo.text_files import TextFileError, json_lines, lines, resolve_files, texts

runner = CliRunner()
GOOD = [{"text": "a wonderful film .", "label": "POS"}, {"text": "a dull film .", "label": "NEG"}]
FORMAT = 'each line must be a JSON object with a non-empty "text" string'


def _bad_file(folder: Path, kind: str) -> Tuple[Path, str]:
    """A JSONL file whose line 3 is bad in the way ``kind`` says, and the refusal expected for it
    (after ``error: `` on a command's console)."""
    path = folder / f"{kind}.jsonl"
    good = [json.dumps(record).encode("utf-8") for record in GOOD]
    if kind == "latin1":  # "café" as Latin-1 writes it: é is the one byte 0xe9
        bad = b'{"text": "caf\xe9 au lait .", "label": "POS"}'
        fix = f"iconv -f latin1 -t utf-8 {path} > {path}.utf8 && mv {path}.utf8 {path}"
        expected = f"{path}, line 3: not UTF-8 (byte 0xe9 at column 14); convert the file, e.g. from Latin-1: {fix}"
    elif kind == "not_json":  # a raw tab inside a JSON string: Python's json names its column
        bad = b'{"text": "tab\there", "label": "POS"}'
        expected = f"{path}, line 3: not JSON (Invalid control character at: column 14); {FORMAT}"
    else:
        bad = b'{"label": "POS"}'
        expected = f"{path}, line 3: no text; {FORMAT}, got '{{\"label\": \"POS\"}}'"
    path.write_bytes(b"\n".join([*good, bad, *good]) + b"\n")
    return path, expected


BAD = ["latin1", "not_json", "no_text"]


def _good_file(folder: Path) -> Path:
    path = folder / "good.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in GOOD * 4), encoding="utf-8")
    return path


def test_lines_number_every_line_and_leave_out_a_byte_order_mark(tmp_path):
    path = tmp_path / "text.txt"
    path.write_bytes("\ufeffone\r\ntwo\rthree\n\nfour".encode("utf-8"))
    assert list(lines(path)) == [(1, "one"), (2, "two"), (3, "three"), (4, ""), (5, "four")]


def test_undecodable_lines_are_refused_or_collected(tmp_path):
    path = tmp_path / "text.txt"
    path.write_bytes(b"fine\ncaf\xe9\nfine again\n\xff\n")
    with pytest.raises(TextFileError, match=r"text.txt, line 2: not UTF-8 \(byte 0xe9 at column 4\)") as refused:
        list(lines(path))
    assert (refused.value.path, refused.value.line) == (path, 2)
    skipped: List[int] = []
    assert list(lines(path, skipped)) == [(1, "fine"), (3, "fine again")]
    assert skipped == [2, 4]


def test_json_lines_skip_blank_lines_and_give_each_object(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"text": "one", "label": "A"}\n\n  \n{"text": "two", "cats": {"A": 1.0}}\n', encoding="utf-8")
    assert [number for number, _ in json_lines(path)] == [1, 4]
    assert list(texts(path)) == [(1, "one"), (4, "two")]


@pytest.mark.parametrize("kind", BAD)
def test_the_reader_names_file_line_and_problem(tmp_path, kind):
    path, expected = _bad_file(tmp_path, kind)
    with pytest.raises(TextFileError) as refused:
        list(texts(path))
    assert str(refused.value) == expected


def test_a_missing_file_or_empty_folder_is_named(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"nowhere.txt: no such file or directory"):
        resolve_files(tmp_path / "nowhere.txt")
    with pytest.raises(FileNotFoundError, match=r"empty: the directory holds no \.txt, "):
        resolve_files(tmp_path / "empty")


def _refused(result, expected: str) -> None:
    assert result.exit_code == 1, result.output
    assert f"error: {expected}\n" in result.output, result.output


@pytest.mark.parametrize("kind", BAD)
def test_adapt_refuses_before_any_work(tmp_path, kind):
    bad, expected = _bad_file(tmp_path, kind)
    _refused(runner.invoke(app, ["adapt", "en_wikitext_small", str(bad), str(tmp_path / "out")]), expected)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", BAD)
def test_pretrain_refuses_before_any_work(tmp_path, kind):
    bad, expected = _bad_file(tmp_path, kind)
    good = _good_file(tmp_path)
    config = str(CONFIGS / "pretrain.cfg")
    train, dev = (bad, good) if kind != "not_json" else (good, bad)  # the held-out text is read first too
    out = tmp_path / "out"
    _refused(runner.invoke(app, ["pretrain", config, str(out), "--paths.train", str(train), "--paths.dev", str(dev)]), expected)
    assert not (out / "vocab.txt").exists() and not (out / "checkpoint").exists()


def test_pretrain_skips_undecodable_lines_when_asked_and_says_how_many(tmp_path):
    text = tmp_path / "train.txt"
    text.write_bytes(b"a fine line .\ncaf\xe9 .\nanother fine line .\n\xff\n")
    out = tmp_path / "out"
    result = runner.invoke(app, [
        "pretrain", str(CONFIGS / "pretrain.cfg"), str(out), "--paths.train", str(text), "--paths.dev", "null",
        "--corpus.on_decode_error", "skip", "--training.max_steps", "1", "--model.lstm_dim", "16",
        "--model.projection_dim", "8", "--model.filters", "[[1, 8]]", "--model.char_embedding_dim", "4",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f'corpus.train: skipping 2 lines not UTF-8 (corpus.on_decode_error = "skip"): {text}, line 2; {text}, line 4' in result.output


@pytest.mark.parametrize("kind", BAD)
def test_embed_refuses_before_any_work(tmp_path, kind):
    bad, expected = _bad_file(tmp_path, kind)
    _refused(runner.invoke(app, ["embed", str(bad), str(tmp_path / "out.hdf5")]), expected)
    assert not list(tmp_path.glob("out.hdf5*"))


def test_embed_reads_the_text_of_each_jsonl_line(tmp_path, fixture_files):
    import h5py

    good = _good_file(tmp_path)
    model = ["--options-file", str(fixture_files[0]), "--weight-file", str(fixture_files[1])]
    result = runner.invoke(app, ["embed", str(good), str(tmp_path / "out.hdf5"), *model])
    assert result.exit_code == 0, result.output
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        index = json.loads(f["sentence_to_index"][0])  # a text that repeats: its last dataset
        assert len(f) == 8 + 1 and f["0"].shape[1] == len(GOOD[0]["text"].split())
    assert index == {GOOD[0]["text"]: "6", GOOD[1]["text"]: "7"}


@pytest.mark.parametrize("kind", BAD)
def test_convert_textcat_refuses_before_any_work(tmp_path, kind):
    bad, expected = _bad_file(tmp_path, kind)
    _refused(runner.invoke(app, ["convert-textcat", str(bad), str(tmp_path / "out")]), expected)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", BAD)
def test_config_reads_the_jsonl_it_is_given(tmp_path, kind):
    bad, expected = _bad_file(tmp_path, kind)
    good = _good_file(tmp_path)
    args = ["config", str(tmp_path / "train.cfg"), "--pipeline", "textcat", "--train", str(good), "--dev", str(bad)]
    _refused(runner.invoke(app, args), expected)
    assert not (tmp_path / "train.cfg").exists()


@pytest.fixture(scope="module")
def textcat_config(tmp_path_factory) -> Path:
    """spaCy's own small textcat config, its corpora read by ``spacy_elmo.TextCatCorpus.v1``: the
    reader is what is tested, so the pipeline is the quickest that spaCy makes."""
    config = init_config(lang="en", pipeline=["textcat"], optimize="efficiency")
    for split in ("train", "dev"):
        config["corpora"][split] = {"@readers": "spacy_elmo.TextCatCorpus.v1", "path": f"${{paths.{split}}}", "limit": 0}
    path = tmp_path_factory.mktemp("spacy_train") / "config.cfg"
    config.to_disk(path)
    return path


@pytest.mark.parametrize("kind", BAD)
def test_the_registered_reader_refuses_as_a_config_error(tmp_path, kind):
    """What spaCy's CLI prints as a heading and a line (a ConfigValidationError), not a traceback."""
    bad, expected = _bad_file(tmp_path, kind)
    with pytest.raises(ConfigValidationError) as refused:
        registry.readers.get("spacy_elmo.TextCatCorpus.v1")(bad)
    assert (refused.value.title, refused.value.desc) == ("spacy_elmo.TextCatCorpus.v1 cannot read its data", expected)


@pytest.mark.slow
@pytest.mark.parametrize("kind", BAD)
def test_spacy_train_refuses_in_one_line_before_training(tmp_path, textcat_config, kind):
    """The train and the dev file are read when spaCy resolves the corpora, inside its own error
    display: one heading and the refusal on one line (not wrapped, so that the iconv command pastes),
    no traceback, before "Training pipeline"."""
    bad, expected = _bad_file(tmp_path, kind)
    good = _good_file(tmp_path)
    train, dev = (good, bad) if kind != "no_text" else (bad, good)
    argv = [sys.executable, "-m", "spacy", "train", str(textcat_config), "--paths.train", str(train),
            "--paths.dev", str(dev), "--training.max_steps", "2"]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, env=subprocess_env(threads=1), capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    assert expected in output.splitlines(), output[-3000:]
    assert "spacy_elmo.TextCatCorpus.v1 cannot read its data" in output
    assert "Traceback" not in output and "Training pipeline" not in output
