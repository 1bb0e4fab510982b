"""Character ids: the released mapping, checked against a per-character re-implementation."""

import numpy as np
import pytest

from numpy_bilm import char_ids as reference_char_ids
from spacy_elmo.chars import BOS_CHAR_IDS, EOS_CHAR_IDS, batch_to_ids

TOKENS = ["The", "", " ", "\n", "naïve", "日本語", "🙂👍🏽", "x" * 1000, "é" * 30, "a\ud800b", "<S>", "</S>"]


def test_every_token_matches_the_reference_mapping():
    ids = batch_to_ids([TOKENS])
    assert ids.shape == (1, len(TOKENS), 50) and ids.dtype == np.int64
    for i, token in enumerate(TOKENS):
        np.testing.assert_array_equal(ids[0, i], reference_char_ids(token), err_msg=repr(token))


def test_layout_of_a_plain_token():
    row = batch_to_ids([["ab"]])[0, 0]
    assert row[:4].tolist() == [259, ord("a") + 1, ord("b") + 1, 260]
    assert (row[4:] == 261).all()


def test_long_tokens_are_truncated_to_48_bytes():
    row = batch_to_ids([["x" * 1000]])[0, 0]
    assert (row[1:49] == ord("x") + 1).all() and row[49] == 260


def test_multibyte_truncation_keeps_leading_bytes():
    row = batch_to_ids([["é" * 30]])[0, 0]  # 60 bytes, cut inside the 25th character
    assert (row[1:49] - 1).tolist() == list(("é" * 30).encode()[:48])


def test_unpaired_surrogates_are_dropped_and_empty_token_is_not_padding():
    surrogate, empty = batch_to_ids([["\ud800", ""]])[0]
    np.testing.assert_array_equal(surrogate, empty)
    assert empty[:2].tolist() == [259, 260] and empty.any()


def test_boundary_tokens():
    np.testing.assert_array_equal(batch_to_ids([["<S>", "</S>"]])[0], [BOS_CHAR_IDS, EOS_CHAR_IDS])
    assert BOS_CHAR_IDS[:3].tolist() == [259, 257, 260]
    assert EOS_CHAR_IDS[:3].tolist() == [259, 258, 260]


def test_padding_rows_are_zero():
    ids = batch_to_ids([["a", "b", "c"], ["d"], []])
    assert ids.shape == (3, 3, 50)
    assert (ids[1, 1:] == 0).all() and (ids[2] == 0).all() and (ids[1, 0] > 0).all()


def test_empty_inputs():
    assert batch_to_ids([]).shape == (0, 0, 50)
    assert batch_to_ids([[], []]).shape == (2, 0, 50)


def test_plain_strings_are_rejected():
    with pytest.raises(TypeError, match="tokenized"):
        batch_to_ids("a sentence")
    with pytest.raises(TypeError, match="tokenized"):
        batch_to_ids(["a sentence", "another"])
    with pytest.raises(TypeError, match="token 1"):
        batch_to_ids([["ok", 3]])
