"""The biLM against the original TensorFlow outputs and an independent NumPy oracle."""

import h5py
import numpy as np
import pytest
import torch

from conftest import ELMO_FIXTURE, assert_float32_close, make_options, write_random_bilm_tf
from numpy_bilm import NumpyBiLM
from spacy_elmo import batch_to_ids, load_bilm


def _run(bilm, sentences):
    device = next(bilm.parameters()).device
    with torch.no_grad():
        layers, mask = bilm(torch.from_numpy(batch_to_ids(sentences)).to(device))
    return layers.cpu().numpy(), mask.cpu().numpy()


@pytest.fixture(scope="module")
def device_bilm(fixture_files, device):
    """The bilm-tf test model on ``--device`` (the float32 promise, 1e-5, holds on CUDA too)."""
    return load_bilm(*fixture_files, device=device)


def test_stateful_top_layer_matches_tensorflow(fixture_files, fixture_sentences):
    """lm_embeddings_k.hdf5 were written by bilm-tf, statefully, in batches of 3 (fixture README).

    TensorFlow's own float32 outputs differ from float64 arithmetic by up to 1.1e-6 here, so the
    check is AllenNLP's: ``allclose(atol=1e-6)`` (relative tolerance 1e-5)."""
    bilm = load_bilm(*fixture_files, stateful=True)
    expected = [h5py.File(ELMO_FIXTURE / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    for i in range(10):
        batch = [fixture_sentences[k][i].split() for k in range(3)]
        layers, mask = _run(bilm, batch)
        for k, sentence in enumerate(batch):
            want = np.concatenate(list(expected[k][str(i)][()]), axis=-1)
            assert mask[k].sum() == len(sentence)
            np.testing.assert_allclose(layers[-1, k, : len(sentence)], want, atol=1e-6, rtol=1e-5)


def test_stateless_differs_from_stateful_after_first_batch(fixture_files, fixture_sentences):
    stateful = load_bilm(*fixture_files, stateful=True)
    stateless = load_bilm(*fixture_files)
    batches = [[fixture_sentences[k][i].split() for k in range(3)] for i in range(2)]
    first = [_run(m, batches[0])[0] for m in (stateful, stateless)]
    assert_float32_close(first[0], first[1])
    second = [_run(m, batches[1])[0] for m in (stateful, stateless)]
    assert np.abs(second[0] - second[1]).max() > 1e-3
    stateful.reset_states()
    assert_float32_close(_run(stateful, batches[1])[0], second[1])


def test_token_embeddings_match_tensorflow(fixture_bilm):
    words = (ELMO_FIXTURE / "vocab_test.txt").read_text(encoding="utf-8").split("\n")
    with h5py.File(ELMO_FIXTURE / "elmo_token_embeddings.hdf5", "r") as f:
        expected = f["embedding"][()]
    n = min(len(words), len(expected))
    with torch.no_grad():
        got = fixture_bilm.token_encoder(torch.from_numpy(batch_to_ids([words])[0])).numpy()
    assert_float32_close(got[:n], expected[:n])


SENTENCES = [
    ["The", "bank", "raised", "its", "rates", "."],
    ["Sie", "saß", "am", "Ufer", "der", "Spree", "🙂"],
    ["日本語", "の", "文", "x" * 200, "", " "],
    ["a"],
]


def test_every_layer_matches_numpy_oracle_on_the_tensorflow_model(fixture_files, device_bilm):
    oracle = NumpyBiLM(*map(str, fixture_files))
    layers, _ = _run(device_bilm, SENTENCES)
    assert layers.shape == (3, len(SENTENCES), 7, 32)
    for i, sentence in enumerate(SENTENCES):
        np.testing.assert_allclose(
            layers[:, i, : len(sentence)], oracle.layers(sentence), atol=1e-5, rtol=0
        )


@pytest.mark.parametrize(
    "shape",
    [
        dict(activation="tanh", n_highway=2, n_layers=3),
        dict(activation="relu", n_highway=1, n_layers=2, clip=0),
        dict(activation="relu", n_highway=0, n_layers=4, filters=((1, 3), (7, 5))),
        dict(use_skip_connections=False),
    ],
    ids=["tanh-2hw-3layers", "no-clipping", "0hw-4layers", "no-skip"],
)
@pytest.mark.filterwarnings("ignore:.*use_skip_connections")
def test_any_released_shape_matches_numpy_oracle(tmp_path, shape):
    options_file, weight_file = write_random_bilm_tf(tmp_path, make_options(**shape))
    oracle = NumpyBiLM(str(options_file), str(weight_file))
    bilm = load_bilm(options_file, weight_file)
    layers, mask = _run(bilm, SENTENCES)
    n_layers = shape.get("n_layers", 2)
    assert layers.shape == (n_layers + 1, len(SENTENCES), 7, 12)
    for i, sentence in enumerate(SENTENCES):
        np.testing.assert_allclose(
            layers[:, i, : len(sentence)], oracle.layers(sentence), atol=1e-5, rtol=0
        )


def test_layer_zero_is_the_token_layer_twice_and_padding_is_zero(device_bilm):
    layers, mask = _run(device_bilm, SENTENCES)
    np.testing.assert_array_equal(layers[0, ..., :16], layers[0, ..., 16:])
    assert mask.tolist()[3] == [True] + [False] * 6
    assert (layers[:, ~mask] == 0).all()
    assert (np.abs(layers[:, mask]).sum(-1) > 0).all()


def test_batch_invariance(device_bilm):
    """A sentence's layers do not depend on padding, its batch neighbours or their order."""
    alone = [_run(device_bilm, [s])[0][:, 0, : len(s)] for s in SENTENCES]
    batched, _ = _run(device_bilm, SENTENCES)
    order = [2, 0, 3, 1]
    shuffled, _ = _run(device_bilm, [SENTENCES[i] for i in order])
    for i, sentence in enumerate(SENTENCES):
        np.testing.assert_allclose(batched[:, i, : len(sentence)], alone[i], atol=1e-5, rtol=0)
        j = order.index(i)
        np.testing.assert_allclose(shuffled[:, j, : len(sentence)], alone[i], atol=1e-5, rtol=0)


def test_empty_inputs_give_empty_outputs(device_bilm):
    layers, mask = _run(device_bilm, [])
    assert layers.shape == (3, 0, 0, 32) and mask.shape == (0, 0)
    layers, mask = _run(device_bilm, [[], ["word"], []])
    assert layers.shape == (3, 3, 1, 32)
    assert mask.tolist() == [[False], [True], [False]]
    assert (layers[:, 0] == 0).all() and (layers[:, 2] == 0).all()


def test_bad_char_ids_get_clear_errors(fixture_bilm):
    with pytest.raises(ValueError, match=r"shape \(batch, max_len, 50\)"):
        fixture_bilm(torch.zeros(2, 3, 49, dtype=torch.long))
    with pytest.raises(TypeError, match="integer"):
        fixture_bilm(torch.zeros(2, 3, 50))
    with pytest.raises(ValueError, match=r"\[0, 262\)"):
        fixture_bilm(torch.full((1, 1, 50), 300))
    ids = torch.from_numpy(batch_to_ids([["a", "b", "c"]]))
    ids[0, 1] = 0
    with pytest.raises(ValueError, match="row 0 has an all-padding token"):
        fixture_bilm(ids)


def test_gradients_flow_to_every_parameter(fixture_files, device):
    bilm = load_bilm(*fixture_files, device=device).train()
    layers, mask = bilm(torch.from_numpy(batch_to_ids(SENTENCES[:2])).to(device))
    layers.sum().backward()
    missing = [n for n, p in bilm.named_parameters() if p.grad is None or not p.grad.abs().sum()]
    # bias_hh duplicates bias_ih, so both get the same gradient; nothing may be left out.
    assert missing == []


@pytest.mark.parametrize("reversed_rows", [False, True])
@pytest.mark.parametrize("with_states", [False, True])
def test_distinct_token_input_products_change_nothing(reversed_rows, with_states):
    """The first layer's input products computed once per distinct token give the per-position
    results, rows read forward or reversed (the backward direction's), from zero or given
    states."""
    from spacy_elmo.nn.lstm import DirectionalLSTM, DistinctInputs, reverse_padded

    torch.manual_seed(0)
    lstm = DirectionalLSTM(6, 10, 4, num_layers=2, cell_clip=3.0, proj_clip=3.0)
    rows = torch.randn(5, 6)
    index = torch.tensor([[0, 1, 2, 1, 3], [0, 4, 1, 0, 0], [0, 2, 0, 0, 0]])
    lengths = torch.tensor([5, 3, 1])
    if reversed_rows:
        index = reverse_padded(index, lengths)
    inputs = rows[index] * (torch.arange(5)[None, :] < lengths[:, None])[..., None]
    states = None
    if with_states:
        states = [(torch.randn(3, 4), torch.randn(3, 10)) for _ in range(2)]
    with torch.no_grad():
        want, want_states = lstm(inputs, lengths, states)
        got, got_states = lstm(DistinctInputs(rows, index), lengths, states)
    for a, b in zip(got, want):
        assert_float32_close(a, b)
    for (h, c), (h_want, c_want) in zip(got_states, want_states):
        assert_float32_close(h, h_want)
        assert_float32_close(c, c_want)
    # Rows that end early keep their own final state, not a neighbour's.
    assert not torch.allclose(got_states[0][0][1], got_states[0][0][2])
