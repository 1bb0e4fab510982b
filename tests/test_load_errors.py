"""Every load error names the file or the component and the next step.

Weight files that were cut short (an interrupted copy or download) or that do not match their
options.json are refused where the weights are read (``nlp.initialize()`` or the first use), by a
check of the header and the shapes that reads no weights first, with the file's size, what its header expected and how to get a
whole copy; a saved pipeline whose elmo files were cut names the component and the file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import pytest
import spacy
import torch
from safetensors import safe_open

from spacy_elmo import load_bilm, save_bilm
from spacy_elmo.files import write_json_atomically
from spacy_elmo.formats import OptionsMismatchError, WeightFileError, check_weight_files
from spacy_elmo.hub.cache import MANIFEST_NAME
from spacy_elmo.sources import resolve_weight_source


def _cut(path: Path, keep: int) -> int:
    """Keep the first ``keep`` bytes of ``path`` (as an interrupted copy would); returns the
    size it had."""
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    return len(data)


@pytest.fixture
def released_dir(tmp_path, fixture_files):
    """The bilm-tf test model as a released model directory (options.json + weights.hdf5)."""
    directory = tmp_path / "released"
    directory.mkdir()
    shutil.copy(fixture_files[0], directory / "options.json")
    shutil.copy(fixture_files[1], directory / "weights.hdf5")
    return directory


@pytest.fixture
def native_dir(tmp_path, fixture_bilm):
    return save_bilm(fixture_bilm, tmp_path / "native")


def _add_elmo(**model):
    """A pipeline with the elmo pipe, initialized: where its model reads the weights (add_pipe
    reads nothing)."""
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("elmo", config={"model": {"@architectures": "spacy_elmo.ElmoModel.v2", **model}})
    nlp.initialize()
    return pipe


def test_a_cut_native_checkpoint_is_refused_at_initialize(native_dir):
    weights = native_dir / "model.safetensors"
    size = _cut(weights, weights.stat().st_size // 2)
    with pytest.raises(WeightFileError) as refused:
        _add_elmo(weights=str(native_dir))
    message = str(refused.value)
    assert message.startswith("elmo pipe 'elmo': ") and str(weights) in message
    assert f"it holds {size // 2:,} bytes, its header describes {size:,}" in message
    assert "python -m spacy_elmo pretrain or convert: copy it again" in message


def test_a_native_checkpoint_cut_inside_its_header(native_dir):
    weights = native_dir / "model.safetensors"
    _cut(weights, 100)
    with pytest.raises(WeightFileError, match="it holds 100 bytes, too few for the header it starts with"):
        _add_elmo(weights=str(native_dir))


@pytest.mark.parametrize("named", ["directory", "two files"])
def test_a_cut_hdf5_is_refused_at_initialize(released_dir, named):
    weights = released_dir / "weights.hdf5"
    size = _cut(weights, weights.stat().st_size - 1000)
    model = (
        {"weights": str(released_dir)} if named == "directory"
        else {"options_file": str(released_dir / "options.json"), "weight_file": str(weights)}
    )
    with pytest.raises(WeightFileError) as refused:
        _add_elmo(**model)
    message = str(refused.value)
    assert str(weights) in message and "truncated or corrupt?" in message
    assert f"it holds {size - 1000:,} bytes, its superblock records {size:,}" in message
    assert "python -m spacy_elmo download NAME (names: small, medium, original" in message


def test_options_of_another_shape_are_refused_naming_both(released_dir, native_dir):
    for directory in (released_dir, native_dir):
        options = json.loads((directory / "options.json").read_text())
        options["lstm"]["projection_dim"] += 2
        (directory / "options.json").write_text(json.dumps(options))
        with pytest.raises(OptionsMismatchError) as refused:
            _add_elmo(weights=str(directory))
        message = str(refused.value)
        assert "has shape" in message and "need" in message and str(directory) in message
        assert "Use the options.json written with these weights" in message


def test_the_check_reads_no_weights(released_dir, native_dir, monkeypatch):
    """Header and shapes only: no HDF5 dataset and no safetensors tensor is read."""
    reads = []
    monkeypatch.setattr(h5py.Dataset, "__getitem__", lambda self, key: reads.append(self.name))
    for directory in (released_dir, native_dir):
        check_weight_files(resolve_weight_source(directory))
    with safe_open(str(native_dir / "model.safetensors"), framework="pt") as handle:
        names = list(handle.keys())
    assert names and reads == []
    monkeypatch.undo()
    assert load_bilm(released_dir) is not None  # the real read still works


def test_a_damaged_bundled_model_says_to_reinstall(tmp_path, monkeypatch):
    from spacy_elmo import DEFAULT_MODEL, sources

    copy = shutil.copytree(DEFAULT_MODEL, tmp_path / DEFAULT_MODEL.name)
    _cut(copy / "model.safetensors", 4096)
    monkeypatch.setattr(sources, "DEFAULT_MODEL", copy)
    with pytest.raises(WeightFileError, match=r"bundled with spacy-elmo is damaged: reinstall the package \(pip install --force-reinstall"):
        _add_elmo()


def test_a_damaged_download_says_to_download_it_again(released_dir, tmp_path, monkeypatch):
    """A cached model whose file has the size the manifest recorded but not its bytes (the
    cache's own check compares sizes): the header check finds it."""
    home = tmp_path / "cache"
    monkeypatch.setenv("SPACY_ELMO_HOME", str(home))
    directory = shutil.copytree(released_dir, home / "small")
    weights = directory / "weights.hdf5"
    data = bytearray(weights.read_bytes())
    data[:8] = b"\0" * 8  # HDF5's signature
    weights.write_bytes(bytes(data))
    files = {name: {"size": (directory / name).stat().st_size} for name in ("options.json", "weights.hdf5")}
    write_json_atomically(directory / MANIFEST_NAME, {"name": "small", "complete": True, "files": files})
    with pytest.raises(WeightFileError) as refused:
        _add_elmo(weights="small")
    message = str(refused.value)
    assert str(weights) in message and f"it holds {len(data):,} bytes" in message
    assert "The downloaded model 'small' is damaged: download it again with python -m spacy_elmo download small --force" in message


def test_a_pipe_built_from_a_config_is_checked_at_initialize(native_dir):
    """spacy train and spacy.load build the pipe from its config without looking at the files
    (they may come from disk next); initialize reads them, and says what is wrong first."""
    _cut(native_dir / "model.safetensors", 5000)
    config = spacy.blank("en").config
    config["nlp"]["pipeline"] = ["elmo"]
    config["components"]["elmo"] = {
        "factory": "elmo", "model": {"@architectures": "spacy_elmo.ElmoModel.v2", "weights": str(native_dir)}
    }
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    with pytest.raises(WeightFileError, match=r"elmo pipe 'elmo': .*model.safetensors: not a complete safetensors weight file"):
        nlp.initialize()


MANYLANGS = Path(__file__).parent / "fixtures" / "manylangs_tiny"


@pytest.mark.parametrize("file_name", ["encoder.pkl", "token_embedder.pkl"])
def test_a_cut_manylangs_weight_file_is_refused_at_initialize(tmp_path, file_name):
    """torch.save's zip archive keeps its directory in its last bytes: a cut file has none."""
    directory = shutil.copytree(MANYLANGS, tmp_path / "manylangs")
    weights = directory / file_name
    size = _cut(weights, weights.stat().st_size // 2)
    with pytest.raises(WeightFileError) as refused:
        _add_elmo(weights=str(directory))
    message = str(refused.value)
    assert message.startswith("elmo pipe 'elmo': ") and str(weights) in message
    assert f"cut short or damaged: it holds {size // 2:,} bytes" in message
    assert "Copy the files again from where they came from" in message


def test_a_cut_manylangs_pickle_of_the_old_format_names_the_file_and_its_size(tmp_path):
    """Before PyTorch 1.6, torch.save wrote a bare pickle, with no header to check: the error
    comes where it is unpickled, with the file and its size."""
    directory = shutil.copytree(MANYLANGS, tmp_path / "manylangs")
    weights = directory / "encoder.pkl"
    torch.save(torch.load(weights, weights_only=True), weights, _use_new_zipfile_serialization=False)
    _cut(weights, weights.stat().st_size // 2)
    with pytest.raises(WeightFileError) as refused:
        _add_elmo(weights=str(directory))
    message = str(refused.value)
    assert str(weights) in message and "not a PyTorch state dict" in message
    assert f"it holds {weights.stat().st_size:,} bytes: cut short or damaged?" in message


@pytest.mark.parametrize("file_name", ["model", "cfg"])
def test_a_cut_saved_pipeline_names_the_component_and_the_file(tmp_path, fixture_files, file_name):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"options_file": str(fixture_files[0]), "weight_file": str(fixture_files[1])}})
    nlp.initialize()
    nlp.to_disk(tmp_path / "pipeline")
    cut = tmp_path / "pipeline" / "elmo" / file_name
    size = cut.stat().st_size
    _cut(cut, size // 2)
    with pytest.raises(ValueError) as refused:
        spacy.load(tmp_path / "pipeline")
    message = str(refused.value)
    assert message.startswith("elmo pipe 'elmo' of the saved pipeline: ")
    assert f"{cut} ({size // 2:,} bytes) is not whole" in message
    assert "Copy the pipeline folder again, or save it again with nlp.to_disk()" in message


def test_the_cli_says_the_same_as_an_error_line(native_dir, tmp_path):
    from typer.testing import CliRunner

    from spacy_elmo.cli import app

    _cut(native_dir / "model.safetensors", 5000)
    (tmp_path / "in.txt").write_text("A sentence .\n")
    result = CliRunner().invoke(app, ["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--weights", str(native_dir)])
    assert result.exit_code == 1
    assert "error: " in result.output and "not a complete safetensors weight file" in result.output
    assert not (tmp_path / "out.hdf5").exists()
