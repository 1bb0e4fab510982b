"""The character-CNN vocabulary cache (``BiLM.cache_token_embeddings``) and reduced precision."""

import h5py
import numpy as np
import pytest
import torch

from conftest import ELMO_FIXTURE
from spacy_elmo import batch_to_ids, load_bilm

WORDS = (ELMO_FIXTURE / "vocab_test.txt").read_text(encoding="utf-8").split("\n")
# Cached words, words that are not, and the edge cases of the character mapping.
SENTENCES = [
    ["The", "bank", "raised", "its", "rates", "."],
    ["unseen-word", "🙂", "日本語", "x" * 200, "", " ", "\ud800"],
    WORDS[:40],
]


@pytest.fixture
def bilm(fixture_files):
    return load_bilm(*fixture_files)


def _layers(bilm, sentences):
    with torch.no_grad():
        layers, _ = bilm(torch.from_numpy(batch_to_ids(sentences)))
    return layers.numpy()


def test_cached_vectors_are_the_tensorflow_token_embeddings(bilm):
    """elmo_token_embeddings.hdf5 holds bilm-tf's char-CNN vectors of vocab_test.txt (fixture README)."""
    with h5py.File(ELMO_FIXTURE / "elmo_token_embeddings.hdf5", "r") as f:
        expected = f["embedding"][()]
    n = min(len(WORDS), len(expected))
    assert bilm.cache_token_embeddings(WORDS[:n]) == len(set(WORDS[:n]))
    ids = torch.from_numpy(batch_to_ids([WORDS[:n]])[0])
    hit, index = bilm.token_cache.lookup(ids)
    assert bool(hit.all())
    np.testing.assert_allclose(bilm.token_cache.vectors[index].numpy(), expected[:n], atol=1e-6, rtol=0)


def test_layers_with_cache_equal_layers_without(bilm):
    reference = _layers(bilm, SENTENCES)
    bilm.cache_token_embeddings(WORDS + ["bank", "🙂", ""])
    np.testing.assert_allclose(_layers(bilm, SENTENCES), reference, atol=1e-6, rtol=0)
    bilm.clear_token_cache()
    assert bilm.token_cache is None


def test_only_cached_words_hit_and_a_hash_match_alone_is_a_miss(bilm):
    cached = ["bank", "river", "🙂"]
    bilm.cache_token_embeddings(cached + ["bank"])
    queries = ["bank", "banks", "river", "🙂", "Bank", "<S>"]
    hit, _ = bilm.token_cache.lookup(torch.from_numpy(batch_to_ids([queries])[0]))
    assert hit.tolist() == [q in cached for q in queries]
    # Same hash, different ids (what a collision looks like): the id comparison must reject it.
    bilm.token_cache.char_ids[:, 5] += 1
    hit, _ = bilm.token_cache.lookup(torch.from_numpy(batch_to_ids([queries])[0]))
    assert not bool(hit.any())


def test_cache_is_recomputed_after_an_in_place_weight_update(bilm):
    bilm.cache_token_embeddings(WORDS)
    before = _layers(bilm, SENTENCES)
    with torch.no_grad():
        bilm.token_encoder.projection.weight.mul_(1.5)
    after = _layers(bilm, SENTENCES)
    bilm.clear_token_cache()
    np.testing.assert_allclose(after, _layers(bilm, SENTENCES), atol=1e-6, rtol=0)
    assert np.abs(after - before).max() > 1e-3


def test_cache_is_bypassed_when_gradients_are_needed_and_never_saved(bilm):
    bilm.cache_token_embeddings(WORDS)
    layers, _ = bilm(torch.from_numpy(batch_to_ids(SENTENCES[:1])))
    layers.sum().backward()
    assert bilm.token_encoder.char_embedding.weight.grad.abs().sum() > 0
    assert not any(key.startswith("token_cache") for key in bilm.state_dict())
    assert bilm.token_cache.vectors.dtype == torch.float32
    bilm.double()  # buffers follow the module
    assert bilm.token_cache.vectors.dtype == torch.float64


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_reduced_precision_is_close_but_not_exact(bilm, precision):
    reference = torch.from_numpy(_layers(bilm, SENTENCES))
    bilm.precision = precision
    with torch.no_grad():
        layers, mask = bilm(torch.from_numpy(batch_to_ids(SENTENCES)))
    assert layers.dtype == torch.float32
    difference = (layers - reference).abs().max()
    assert 0 < difference < 0.2
    cosine = torch.nn.functional.cosine_similarity(layers[:, mask], reference[:, mask], dim=-1)
    assert cosine.min() > 0.995
    assert (layers[:, ~mask] == 0).all()


def test_unknown_precision_is_refused(bilm):
    with pytest.raises(ValueError, match="precision must be one of"):
        bilm.precision = "fp8"


def test_tf32_is_float32_on_the_cpu(bilm):
    """TF32 only changes CUDA products: on the CPU it is the exact path."""
    reference = torch.from_numpy(_layers(bilm, SENTENCES))
    bilm.precision = "tf32"
    with torch.no_grad():
        layers, _ = bilm(torch.from_numpy(batch_to_ids(SENTENCES)))
    assert torch.equal(layers, reference)
