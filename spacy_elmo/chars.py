"""Token text -> character ids, the mapping the released ELMo models were trained with.

Each token becomes 50 ids: begin-of-word (258), its UTF-8 bytes (truncated to 48 bytes), end-of-word
(259), then padding (260); every id is shifted by +1 so that 0 is free to mark an all-padding token
(a padded position in a batch). The sentence-boundary tokens ``<S>`` and ``</S>`` use the reserved
byte values 256 and 257.

Documented edge cases (identical to bilm-tf and AllenNLP, so released models see what they saw in
training):
- the empty string is a real token ``[BOW, EOW]``, never a padding row;
- whitespace tokens (" ", "\\n") keep their bytes;
- bytes that cannot be encoded (unpaired surrogates such as ``"\\ud800"``) are dropped;
- truncation to 48 bytes can cut a multi-byte character; only its leading bytes are kept;
- a token whose text is literally ``<S>`` or ``</S>`` maps to the boundary ids.
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
    """Map a flat list of tokens to an int64 array of shape (len(tokens), 50).

    The only per-token Python work is ``str.encode``; bytes are scattered into the array with one
    vectorised NumPy assignment.
    """
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
    """Character ids for a batch of tokenized sentences.

    Returns an int64 array of shape (batch, max_len, 50); positions past a sentence's end are all
    zero. An empty batch gives shape (0, 0, 50); a batch of empty sentences gives (batch, 0, 50).
    """
    return pad_batch(sentences, tokens_to_ids, MAX_CHARS_PER_TOKEN)


def pad_batch(
    sentences: Sequence[Sequence[str]],
    tokens_to_ids: Callable[[Sequence[str]], np.ndarray],
    width: int,
) -> np.ndarray:
    """(batch, max_len, width) int64 ids of any token mapping (``tokens_to_ids``: n tokens ->
    (n, width)); positions past a sentence's end are all zero. Every indexer pads through this."""
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
