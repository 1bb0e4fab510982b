"""Weight files: bilm-tf HDF5 in and out, native checkpoints, and clear errors for bad files."""

import shutil

import h5py
import numpy as np
import pytest
import torch

from conftest import make_options, write_random_bilm_tf
from spacy_elmo import (
    WeightFileError,
    batch_to_ids,
    export_bilm_tf,
    load_bilm,
    read_bilm_tf_weights,
    save_bilm,
)
from spacy_elmo.options import BiLMOptions

SENTENCES = [["Round", "trips", "must", "be", "exact", "."], ["ok"]]


def _layers(bilm):
    with torch.no_grad():
        return bilm(torch.from_numpy(batch_to_ids(SENTENCES)))[0].numpy()


def _forget_block(bias: np.ndarray) -> slice:
    """The f gate's columns of an LSTM bias in TF's gate order (i, j, f, o)."""
    dim = bias.shape[0] // 4
    return slice(2 * dim, 3 * dim)


def test_export_writes_the_same_datasets_bit_for_bit(tmp_path, fixture_files):
    """Every dataset bit for bit, but for the LSTM biases' forget gates: loading adds TF's
    implicit forget bias 1.0 in float32 and export takes it off, so b + 1 - 1 is b rounded to
    float32's spacing near 1: at most half of it times (1 + |b|) (the subtraction is exact)."""
    bilm = load_bilm(*fixture_files)
    export_bilm_tf(bilm, tmp_path)
    with h5py.File(fixture_files[1], "r") as original, h5py.File(tmp_path / "weights.hdf5", "r") as new:
        names = []
        original.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        written = []
        new.visititems(lambda n, o: written.append(n) if isinstance(o, h5py.Dataset) else None)
        assert sorted(names) == sorted(written)
        for name in names:
            got, want = new[name][()], original[name][()]
            if name.endswith("LSTMCell/B"):
                f = _forget_block(want)
                bound = np.finfo(np.float32).eps / 2 * (1 + np.abs(want[f]).astype(np.float64))
                assert (np.abs(got[f].astype(np.float64) - want[f]) <= bound).all(), name
                got, want = np.delete(got, f), np.delete(want, f)
            np.testing.assert_array_equal(got, want, err_msg=name)
    reloaded = load_bilm(tmp_path / "options.json", tmp_path / "weights.hdf5")
    np.testing.assert_array_equal(_layers(reloaded), _layers(bilm))


def test_native_checkpoint_round_trip(tmp_path, fixture_files):
    bilm = load_bilm(*fixture_files)
    save_bilm(bilm, tmp_path / "model")
    assert (tmp_path / "model" / "model.safetensors").is_file()
    np.testing.assert_array_equal(_layers(load_bilm(tmp_path / "model")), _layers(bilm))


def test_directory_with_hdf5_loads(tmp_path, fixture_files):
    shutil.copy(fixture_files[0], tmp_path / "options.json")
    shutil.copy(fixture_files[1], tmp_path / "weights.hdf5")
    np.testing.assert_array_equal(
        _layers(load_bilm(tmp_path)), _layers(load_bilm(*fixture_files))
    )


def test_tensorflow_gate_order_and_forget_bias(fixture_files):
    """Column block j of W_0 (TF's candidate) becomes torch's g block; B's f block gets +1."""
    options = BiLMOptions.from_file(fixture_files[0])
    state = read_bilm_tf_weights(options, fixture_files[1])
    h = options.lstm.dim
    with h5py.File(fixture_files[1], "r") as f:
        w0 = f["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"][()]
        b = f["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B"][()]
    key = "backward_lstm.layers.1"
    np.testing.assert_array_equal(state[f"{key}.weight_ih_l0"][2 * h : 3 * h].numpy(), w0[:16, h : 2 * h].T)
    np.testing.assert_array_equal(state[f"{key}.weight_hh_l0"][h : 2 * h].numpy(), w0[16:, 2 * h : 3 * h].T)
    np.testing.assert_allclose(state[f"{key}.bias_ih_l0"][h : 2 * h].numpy(), b[2 * h : 3 * h] + 1)


def _copy_without(src, dst, skip=(), replace=None):
    with h5py.File(src, "r") as fin, h5py.File(dst, "w") as fout:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and name not in skip:
                fout[name] = replace[name] if replace and name in replace else obj[()]
        fin.visititems(visit)


def test_shape_mismatch_names_dataset_and_both_shapes(tmp_path, fixture_files):
    bad = tmp_path / "bad.hdf5"
    _copy_without(fixture_files[1], bad, replace={"CNN_proj/W_proj": np.zeros((124, 8), np.float32)})
    with pytest.raises(WeightFileError, match=r"'CNN_proj/W_proj' has shape \(124, 8\).*need \(124, 16\)"):
        load_bilm(fixture_files[0], bad)


def test_missing_dataset_is_named(tmp_path, fixture_files):
    bad = tmp_path / "bad.hdf5"
    _copy_without(fixture_files[1], bad, skip={"CNN_high_1/W_carry"})
    with pytest.raises(WeightFileError, match=r"missing dataset 'CNN_high_1/W_carry'.*n_highway=2"):
        load_bilm(fixture_files[0], bad)


def test_options_that_use_fewer_layers_than_the_file_are_refused(tmp_path):
    options_file, weight_file = write_random_bilm_tf(tmp_path / "a", make_options(n_highway=2))
    other, _ = write_random_bilm_tf(tmp_path / "b", make_options(n_highway=1))
    with pytest.raises(WeightFileError, match="CNN_high_1.*not used by the options"):
        load_bilm(other, weight_file)


def test_mismatched_options_and_weights(tmp_path, fixture_files):
    options_file, _ = write_random_bilm_tf(tmp_path, make_options(projection_dim=8))
    with pytest.raises(WeightFileError, match="char_embed|CNN"):
        load_bilm(options_file, fixture_files[1])


def test_truncated_hdf5_gets_a_clear_error(tmp_path, fixture_files):
    data = fixture_files[1].read_bytes()
    bad = tmp_path / "truncated.hdf5"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(WeightFileError, match="truncated.hdf5"):
        load_bilm(fixture_files[0], bad)


def test_non_finite_weights_are_refused(tmp_path, fixture_files):
    bad = tmp_path / "nan.hdf5"
    _copy_without(fixture_files[1], bad, replace={"CNN/b_cnn_0": np.full(4, np.nan, np.float32)})
    with pytest.raises(WeightFileError, match="CNN/b_cnn_0.*NaN"):
        load_bilm(fixture_files[0], bad)


def test_a_dataset_that_is_not_float_is_named(tmp_path, fixture_files):
    bad = tmp_path / "bytes.hdf5"
    _copy_without(fixture_files[1], bad, replace={"CNN/b_cnn_0": np.array([b"a"] * 4)})
    with pytest.raises(WeightFileError, match=r"'CNN/b_cnn_0' holds \|S1 values, not floats"):
        load_bilm(fixture_files[0], bad)


def test_a_dangling_external_link_is_named(tmp_path, fixture_files):
    bad = tmp_path / "linked.hdf5"
    _copy_without(fixture_files[1], bad, skip={"char_embed"})
    with h5py.File(bad, "a") as handle:
        handle["char_embed"] = h5py.ExternalLink(str(tmp_path / "gone.hdf5"), "char_embed")
    with pytest.raises(WeightFileError, match="linked.hdf5: dataset 'char_embed' cannot be read"):
        load_bilm(fixture_files[0], bad)


def test_a_corrupt_hdf5_beside_the_weights_is_named(tmp_path, fixture_files):
    shutil.copy(fixture_files[0], tmp_path / "options.json")
    shutil.copy(fixture_files[1], tmp_path / "lm_weights.hdf5")
    np.testing.assert_array_equal(_layers(load_bilm(tmp_path)), _layers(load_bilm(*fixture_files)))
    data = fixture_files[1].read_bytes()
    (tmp_path / "cache.hdf5").write_bytes(data[: len(data) // 3])
    with pytest.raises(WeightFileError, match="cache.hdf5: not a readable HDF5 file"):
        load_bilm(tmp_path)


def test_garbage_and_missing_files(tmp_path, fixture_files):
    garbage = tmp_path / "weights.bin"
    garbage.write_bytes(b"\x00" * 100)
    with pytest.raises(WeightFileError, match="weights.bin"):
        load_bilm(fixture_files[0], garbage)
    with pytest.raises(FileNotFoundError, match="weight file not found"):
        load_bilm(fixture_files[0], tmp_path / "missing.hdf5")
    with pytest.raises(FileNotFoundError, match="no model.safetensors or weights.hdf5"):
        load_bilm(tmp_path)


def test_native_checkpoint_with_wrong_options(tmp_path, fixture_files):
    save_bilm(load_bilm(*fixture_files), tmp_path)
    options_file, _ = write_random_bilm_tf(tmp_path / "other", make_options())
    shutil.copy(options_file, tmp_path / "options.json")
    with pytest.raises(WeightFileError, match="model.safetensors.*(shape|missing)"):
        load_bilm(tmp_path)
