"""Token text -> character ids, the mapping the released ELMo models were trained with: 50 ids a
token (begin-of-word, UTF-8 bytes truncated to 48, end-of-word, padding), shifted by +1 so that 0
marks an all-padding token. Edge cases are bilm-tf's and AllenNLP's, so released models see what
they saw in training (docs/reference/python.md lists them).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

MAX_CHARS_PER_TOKEN = 50
BEGIN_OF_SENTENCE = 256
END_OF_SENTENCE = 257
BEGIN_OF_WORD = 258
END_OF_WORD = 259
PADDING = 260
#: 256 bytes + 5 specials + the all-padding id 0 after the +1 shift.
N_CHARACTERS = 262

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _special_token_ids(marker: int) -> np.ndarray:
    ids = np.full(MAX_CHARS_PER_TOKEN, PADDING, dtype=np.int64)
    ids[:3] = (BEGIN_OF_WORD, marker, END_OF_WORD)
    return ids + 1


#: Character ids (after the +1 shift) of the sentence-boundary tokens, shape (50,).
BOS_CHAR_IDS = _special_token_ids(BEGIN_OF_SENTENCE)
EOS_CHAR_IDS = _special_token_ids(END_OF_SENTENCE)


def tokens_to_ids(tokens: Sequence[str]) -> np.ndarray:
    """A flat list of tokens -> int64 (len(tokens), 50); per token only ``str.encode``."""
    n_tokens = len(tokens)
    max_bytes = MAX_CHARS_PER_TOKEN - 2
    encoded = []
    specials = []
    for i, token in enumerate(tokens):
        if not isinstance(token, str):
            raise TypeError(f"token {i} is a {type(token).__name__}, expected str: {token!r}")
        if token == BOS_TOKEN or token == EOS_TOKEN:
            specials.append(i)
        encoded.append(token.encode("utf-8", "ignore")[:max_bytes])
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=n_tokens)
    ids = np.full((n_tokens, MAX_CHARS_PER_TOKEN), PADDING, dtype=np.int64)
    ids[:, 0] = BEGIN_OF_WORD
    if n_tokens:
        byte_values = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        rows = np.repeat(np.arange(n_tokens), lengths)
        starts = np.cumsum(lengths) - lengths
        cols = np.arange(byte_values.size) - np.repeat(starts, lengths) + 1
        ids[rows, cols] = byte_values
        ids[np.arange(n_tokens), lengths + 1] = END_OF_WORD
    ids += 1
    for i in specials:
        ids[i] = BOS_CHAR_IDS if tokens[i] == BOS_TOKEN else EOS_CHAR_IDS
    return ids


def batch_to_ids(sentences: Sequence[Sequence[str]]) -> np.ndarray:
    """Character ids for a batch of tokenized sentences: int64 (batch, max_len, 50), zero past a
    sentence's end; an empty batch gives (0, 0, 50)."""
    return pad_batch(sentences, tokens_to_ids, MAX_CHARS_PER_TOKEN)


def pad_batch(
    sentences: Sequence[Sequence[str]],
    tokens_to_ids: Callable[[Sequence[str]], np.ndarray],
    width: int,
) -> np.ndarray:
    """(batch, max_len, width) int64 ids of any ``tokens_to_ids``, zero past a sentence's end."""
    if isinstance(sentences, str) or any(isinstance(s, str) for s in sentences):
        raise TypeError(
            "batch_to_ids expects a list of tokenized sentences (list of lists of str), "
            "got a plain string; split it into tokens first"
        )
    lengths = np.asarray([len(sentence) for sentence in sentences], dtype=np.int64)
    max_len = int(lengths.max(initial=0))
    ids = np.zeros((len(sentences), max_len, width), dtype=np.int64)
    mask = np.arange(max_len)[None, :] < lengths[:, None]
    ids[mask] = tokens_to_ids([token for sentence in sentences for token in sentence])
    return ids
