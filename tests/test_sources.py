"""Where weights come from (``spacy_elmo.sources``): one resolver for the pipe, ``load_bilm``,
the CLI and pretraining's ``[initialize]``."""

from __future__ import annotations

import shutil

import pytest
import torch
from typer.testing import CliRunner

from conftest import ELMO_FIXTURE, make_options, write_random_bilm_tf
from spacy_elmo import DEFAULT_MODEL, WeightSource, load_bilm, load_bilm_from, resolve_weight_source, save_bilm
from spacy_elmo.cli import app


def test_a_released_directory_with_any_hdf5_name_resolves():
    """The AllenNLP fixture holds lm_weights.hdf5 (and cached token embeddings, also HDF5)."""
    source = resolve_weight_source(ELMO_FIXTURE)
    assert source == WeightSource(
        ELMO_FIXTURE / "options.json", ELMO_FIXTURE / "lm_weights.hdf5", "bilm-tf"
    )
    assert source.directory == ELMO_FIXTURE


def test_directory_and_files_load_the_same_biLM(fixture_files):
    by_directory = load_bilm_from(resolve_weight_source(ELMO_FIXTURE))
    by_files = load_bilm(*fixture_files)
    for (name, a), (_, b) in zip(by_directory.state_dict().items(), by_files.state_dict().items()):
        assert torch.equal(a, b), name
    assert not by_directory.training


def test_native_checkpoint_comes_before_hdf5(tmp_path, fixture_files):
    save_bilm(load_bilm(*fixture_files), tmp_path)
    shutil.copy(fixture_files[1], tmp_path / "lm_weights.hdf5")
    source = resolve_weight_source(tmp_path)
    assert source.weight_file.name == "model.safetensors" and source.format == "native"


def test_two_released_weight_files_are_ambiguous(tmp_path):
    write_random_bilm_tf(tmp_path, make_options())
    shutil.copy(tmp_path / "weights.hdf5", tmp_path / "a.hdf5")
    (tmp_path / "weights.hdf5").rename(tmp_path / "b.hdf5")
    with pytest.raises(ValueError, match=r"several bilm-tf weight files \(a.hdf5, b.hdf5\)"):
        resolve_weight_source(tmp_path)


def test_errors_name_the_setting_and_the_file(tmp_path, fixture_files):
    options, weights = fixture_files
    with pytest.raises(FileNotFoundError, match="initialize.bilm .*nowhere does not exist"):
        resolve_weight_source(tmp_path / "nowhere", what="initialize.bilm")
    with pytest.raises(FileNotFoundError, match="no model.safetensors or weights.hdf5"):
        resolve_weight_source(tmp_path)
    with pytest.raises(ValueError, match="not both"):
        resolve_weight_source(tmp_path, options, weights)
    with pytest.raises(ValueError, match="options_file is missing"):
        resolve_weight_source(weight_file=weights)
    with pytest.raises(FileNotFoundError, match="'nowhere' is neither a model directory nor a downloaded model"):
        resolve_weight_source("nowhere")
    with pytest.raises(FileNotFoundError, match="options file not found: .*nope.json"):
        resolve_weight_source(options_file=tmp_path / "nope.json", weight_file=weights)


def test_init_config_checks_the_model_up_front(tmp_path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(app, ["init-config", str(tmp_path / "out.cfg"), "--model", str(tmp_path / "empty")])
    assert result.exit_code != 0
    assert "no model.safetensors or weights.hdf5" in result.output
    assert not (tmp_path / "out.cfg").exists()
    result = CliRunner().invoke(app, ["init-config", str(tmp_path / "out.cfg"), "--model", str(ELMO_FIXTURE)])
    assert result.exit_code == 0, result.output
    assert f'init_bilm = "{ELMO_FIXTURE}"' in (tmp_path / "out.cfg").read_text()


def test_nothing_named_means_the_bundled_model():
    source = resolve_weight_source()
    assert source.directory == DEFAULT_MODEL and source.format == "native"
    assert load_bilm_from(source).output_dim == 256


def test_the_bundled_model_by_its_name(tmp_path, monkeypatch):
    """``en_wikitext_small`` names the bundled model (no download); a directory of that name here wins."""
    monkeypatch.chdir(tmp_path)
    assert resolve_weight_source("en_wikitext_small") == resolve_weight_source()
    assert load_bilm("en_wikitext_small").output_dim == 256
    (tmp_path / "en_wikitext_small").mkdir()
    with pytest.raises((FileNotFoundError, ValueError), match="en_wikitext_small"):
        resolve_weight_source("en_wikitext_small")  # the empty local directory, not the bundled model


def test_an_existing_directory_wins_over_a_model_name(tmp_path, monkeypatch, fixture_files):
    """A bare name is looked up in the download cache only when no such directory exists here."""
    save_bilm(load_bilm(*fixture_files), tmp_path / "small")
    monkeypatch.chdir(tmp_path)
    source = resolve_weight_source("small")
    assert source.directory.resolve() == (tmp_path / "small").resolve() and source.format == "native"
