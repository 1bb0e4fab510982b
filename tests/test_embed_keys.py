"""``python -m spacy_elmo embed --use-sentence-keys`` and ``--threads``, run as a user runs them
(a subprocess): AllenNLP's option, datasets named by the sentences themselves."""

import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

from conftest import checkout_pythonpath

REPO = Path(__file__).resolve().parents[1]


def _embed(tmp_path, lines, *options, output="out.hdf5"):
    (tmp_path / "input.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "embed", str(tmp_path / "input.txt"), str(tmp_path / output), *options],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )


def test_sentence_keys_name_the_datasets(tmp_path, fixture_files):
    options, weights = map(str, fixture_files)
    lines = ["The bank of the river .", "She went to the bank ."]
    args = ["--options-file", options, "--weight-file", weights, "--layers", "top", "--threads", "1"]
    by_number = _embed(tmp_path, lines, *args)
    assert by_number.returncode == 0, by_number.stderr
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        numbered = {key: f[key][()] for key in ("0", "1")}
    by_text = _embed(tmp_path, lines, *args, "--use-sentence-keys", output="keys.hdf5")
    assert by_text.returncode == 0, by_text.stderr
    with h5py.File(tmp_path / "keys.hdf5", "r") as f:
        assert sorted(f.keys()) == sorted(lines)  # no sentence_to_index: the names are the index
        for number, line in enumerate(lines):
            np.testing.assert_array_equal(f[line][()], numbered[str(number)])


def test_sentences_that_cannot_be_names_stop_the_run(tmp_path, fixture_files):
    options, weights = map(str, fixture_files)
    args = ["--options-file", options, "--weight-file", weights, "--use-sentence-keys"]
    for lines, problem in (
        (["Same sentence .", "Same sentence ."], "sentence 1 ('Same sentence .') repeats an earlier sentence"),
        (["A sentence .", ""], "sentence 1 ('') is empty"),
        (["either / or ."], 'sentence 0 (\'either / or .\') contains "/"'),
    ):
        result = _embed(tmp_path, lines, *args)
        assert result.returncode == 1
        assert f"--use-sentence-keys: {problem}" in result.stderr
        assert "run without --use-sentence-keys" in result.stderr
        assert not (tmp_path / "out.hdf5").exists()  # stopped before the job started:
        assert not (tmp_path / "out.hdf5.parts").exists()  # no output, no chunks


#: ``python -m spacy_elmo`` in a checkout that nobody installed: no package's entry points are
#: visible to spaCy's registries (catalogue reads them once, into this variable).
WITHOUT_ENTRY_POINTS = """
import runpy, sys
import catalogue
catalogue.AVAILABLE_ENTRY_POINTS = {}
sys.argv = ["spacy_elmo", *sys.argv[1:]]
runpy.run_module("spacy_elmo", run_name="__main__")
"""


def test_embed_registers_the_pipe_itself_without_entry_points(tmp_path, fixture_files):
    """The GPU machine ran the source checkout with no entry points installed, and ``embed``
    failed with spaCy's E002 (no factory 'elmo'): the command must register what it adds."""
    options, weights = map(str, fixture_files)
    (tmp_path / "input.txt").write_text("The bank of the river .\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1"}
    args = ["embed", str(tmp_path / "input.txt"), str(tmp_path / "out.hdf5"), "--options-file", options, "--weight-file", weights]
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT_ENTRY_POINTS, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        assert 6 in f["0"].shape  # the sentence's six tokens
