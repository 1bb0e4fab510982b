"""From docs to biLM sequences (``spacy_elmo.layers.doc_layers``): sentences, windows, whitespace, the
layer cache."""

from __future__ import annotations

import numpy as np
import spacy
from spacy.tokens import Doc

from spacy_elmo.layers.doc_layers import LayerCache, split_sequences


def test_one_sequence_per_sentence_when_the_doc_has_sentences():
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    doc = nlp("It rained. We stayed in.")
    assert [list(s) for s in split_sequences(doc, 100)] == [[0, 1, 2], [3, 4, 5, 6]]


def test_long_text_is_cut_into_near_equal_windows():
    doc = Doc(spacy.blank("en").vocab, words=[f"w{i}" for i in range(10)])
    sequences = split_sequences(doc, max_length=4)
    assert [len(s) for s in sequences] == [4, 3, 3]
    assert np.concatenate(sequences).tolist() == list(range(10))


def test_whitespace_tokens_are_left_out():
    doc = Doc(spacy.blank("en").vocab, words=["a", "\n", "b"], spaces=[True, False, False])
    assert [list(s) for s in split_sequences(doc, 10)] == [[0, 2]]


def test_layer_cache_evicts_least_recently_used_within_its_bytes():
    cache = LayerCache(max_bytes=2 * 4 * 4)  # two arrays of 4 float32
    a, b, c = (np.full(4, v, np.float32) for v in (1, 2, 3))
    cache.put(("a",), a)
    cache.put(("b",), b)
    assert cache.get(("a",)) is a  # a is now the most recently used
    cache.put(("c",), c)
    assert cache.get(("b",)) is None and cache.get(("a",)) is a and cache.get(("c",)) is c
    assert cache.nbytes == 32 and (cache.hits, cache.misses) == (3, 1)
