"""The token cache (``BiLMRunner.cache_token_embeddings``: an LRU of character-CNN vectors filled
from the text, optionally pre-filled with a vocabulary) and reduced precision."""

import h5py
import numpy as np
import pytest
import torch

from conftest import ELMO_FIXTURE, assert_float32_close, run_in_threads
from spacy_elmo import BiLMRunner, batch_to_ids, load_bilm

WORDS = (ELMO_FIXTURE / "vocab_test.txt").read_text(encoding="utf-8").split("\n")
# Cached words, words that are not, and the edge cases of the character mapping.
SENTENCES = [
    ["The", "bank", "raised", "its", "rates", "."],
    ["unseen-word", "🙂", "日本語", "x" * 200, "", " ", "\ud800"],
    WORDS[:40],
]


@pytest.fixture
def bilm(fixture_files):
    """The fixture model in a runner (the token cache and the precision are the runner's)."""
    return BiLMRunner(load_bilm(*fixture_files))


def _layers(bilm, sentences):
    with torch.no_grad():
        layers, _ = bilm(torch.from_numpy(batch_to_ids(sentences)))
    return layers.numpy()


def _refuse(char_ids):
    raise AssertionError(f"the encoder ran on {char_ids.shape[0]} rows; all were cached")


def test_cached_vectors_are_the_tensorflow_token_embeddings(bilm):
    """elmo_token_embeddings.hdf5 holds bilm-tf's char-CNN vectors of vocab_test.txt (fixture README)."""
    with h5py.File(ELMO_FIXTURE / "elmo_token_embeddings.hdf5", "r") as f:
        expected = f["embedding"][()]
    n = min(len(WORDS), len(expected))
    assert bilm.cache_token_embeddings(WORDS[:n]) == len(set(WORDS[:n]))
    ids = torch.from_numpy(batch_to_ids([WORDS[:n]])[0])
    assert_float32_close(bilm.token_cache.encode(ids, _refuse).numpy(), expected[:n])


def test_layers_with_cache_equal_layers_without(bilm):
    reference = _layers(bilm, SENTENCES)
    bilm.cache_token_embeddings(WORDS + ["bank", "🙂", ""])
    assert_float32_close(_layers(bilm, SENTENCES), reference)
    bilm.clear_token_cache()
    assert bilm.token_cache is None


def test_without_a_vocabulary_the_cache_fills_from_the_text(bilm):
    """No word list (released models ship none): the first call fills the cache, the second is
    all hits, and both equal the uncached layers."""
    reference = _layers(bilm, SENTENCES)
    assert bilm.cache_token_embeddings(max_words=1000) == 0
    assert_float32_close(_layers(bilm, SENTENCES), reference)
    cache = bilm.token_cache
    distinct = len(cache)  # the sentences' distinct tokens, <S> and </S>
    assert distinct > 40 and cache.hits == 0 and cache.misses == distinct
    assert_float32_close(_layers(bilm, SENTENCES), reference)
    assert cache.hits == distinct and cache.misses == distinct and len(cache) == distinct


def test_the_cache_keeps_the_most_recently_used_words_up_to_its_size(bilm):
    reference = _layers(bilm, SENTENCES)
    bilm.cache_token_embeddings(max_words=5)
    assert_float32_close(_layers(bilm, SENTENCES), reference)
    assert len(bilm.token_cache) == 5
    bilm.cache_token_embeddings(max_words=5)
    for word in ["a", "b", "c", "d", "e", "a", "f"]:  # "a" used again, so "b" is the oldest
        _layers(bilm, [[word]])
    hit_words = []
    for word in ["a", "b", "f"]:
        before = bilm.token_cache.hits
        _layers(bilm, [[word]])
        if bilm.token_cache.hits - before == 3:  # <S>, the word, </S>
            hit_words.append(word)
    assert hit_words == ["a", "f"]


def test_only_the_same_ids_hit(bilm):
    cached = ["bank", "river", "🙂"]
    bilm.cache_token_embeddings(cached + ["bank"])
    queries = ["bank", "banks", "river", "🙂", "Bank", "<S>"]
    ids = torch.from_numpy(batch_to_ids([queries])[0])
    encoded = []
    vectors = bilm.token_cache.encode(ids, lambda rows: encoded.append(rows) or bilm.bilm.token_encoder(rows))
    assert [row.tolist() for row in encoded[0]] == [ids[i].tolist() for i, q in enumerate(queries) if q not in cached]
    with torch.no_grad():
        assert_float32_close(vectors.numpy(), bilm.bilm.token_encoder(ids).numpy())


def test_cache_is_recomputed_after_an_in_place_weight_update(bilm):
    bilm.cache_token_embeddings(WORDS, max_words=2000)
    before = _layers(bilm, SENTENCES)
    with torch.no_grad():
        bilm.bilm.token_encoder.projection.weight.mul_(1.5)
    after = _layers(bilm, SENTENCES)
    bilm.clear_token_cache()
    assert_float32_close(after, _layers(bilm, SENTENCES))
    assert np.abs(after - before).max() > 1e-3


def test_a_new_precision_or_dtype_empties_and_refills_the_cache(bilm):
    bilm.cache_token_embeddings(["bank"], max_words=100)
    _layers(bilm, SENTENCES[:1])
    assert bilm.token_cache.state[0] == "fp32" and len(bilm.token_cache) > 1
    bilm.precision = "int8"
    int8_cached = _layers(bilm, SENTENCES)
    assert bilm.token_cache.state[0] == "int8"
    bilm.clear_token_cache()
    assert_float32_close(int8_cached, _layers(bilm, SENTENCES))
    bilm.precision = "fp32"
    bilm.cache_token_embeddings(["bank"], max_words=100)
    bilm.double()
    with torch.no_grad():
        layers, _ = bilm(torch.from_numpy(batch_to_ids(SENTENCES[:1])))
    assert bilm.token_cache._vectors.dtype == torch.float64 and len(bilm.token_cache) > 1


def test_cache_is_bypassed_when_gradients_are_needed_and_never_saved(bilm):
    bilm.cache_token_embeddings(WORDS)
    size = len(bilm.token_cache)
    layers, _ = bilm(torch.from_numpy(batch_to_ids(SENTENCES[:1])))
    layers.sum().backward()
    assert bilm.bilm.token_encoder.char_embedding.weight.grad.abs().sum() > 0
    assert len(bilm.token_cache) == size and bilm.token_cache.hits == 0
    assert not any(key.startswith("token_cache") for key in bilm.state_dict())


def test_concurrent_calls_from_four_threads_equal_sequential_ones(bilm):
    """A web server's threads running the same biLM at once: one cache, the same layers."""
    batches = [SENTENCES[i % 3 :] + [WORDS[i * 7 : i * 7 + 9]] for i in range(12)]
    expected = [_layers(bilm, batch) for batch in batches]
    bilm.cache_token_embeddings(max_words=60)  # small: words are evicted while others read
    got = run_in_threads(lambda batch: _layers(bilm, batch), batches * 2, n_threads=4)
    for layers, reference in zip(got, expected * 2):
        assert_float32_close(layers, reference)
    assert len(bilm.token_cache) == 60 and bilm.token_cache.hits > 0


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
