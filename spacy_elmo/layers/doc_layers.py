"""From Docs to biLM layers and back: sequences, length batching, the layer cache; shared by the
``elmo`` pipe and ``ElmoEmbedder``. Sentences, windows and whitespace tokens: docs/guide/using.md;
the cache: docs/reference/config.md (``cache_size_mb``).
"""

from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats3d

from ..batching import batch_by_length
from ..nn.lru import LRU
from .bilm_model import bilm_settings, initialized


def split_sequences(
    doc: Doc, max_length: int, texts: Optional[List[str]] = None
) -> List[np.ndarray]:
    """``doc``'s biLM sequences (token indices, whitespace left out): one per sentence or the doc,
    longer ones cut into ``ceil(n / max_length)`` windows of near-equal length."""
    if texts is None:
        texts = [token.text for token in doc]
    read = np.flatnonzero([not text.isspace() for text in texts])
    if doc.has_annotation("SENT_START"):
        starts = [sentence.start for sentence in doc.sents][1:]
        segments = np.split(read, np.searchsorted(read, starts))
    else:
        segments = [read]
    sequences = []
    for segment in segments:
        if len(segment):
            sequences.extend(np.array_split(segment, math.ceil(len(segment) / max_length)))
    return sequences


class LayerCache(LRU):
    """The exact biLM layers of sequences already seen, keyed by their words, least recently used
    out (``nn.lru``), bounded by ``max_bytes``; locked, for a web server's threads."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes, size=_nbytes)

    @property
    def max_bytes(self) -> int:
        return self.max_size

    @property
    def nbytes(self) -> int:
        return self.total

    def __getstate__(self) -> dict:
        """A copy or a pickle (a spawned worker of ``nlp.pipe(n_process=N)``) starts empty."""
        return {"max_bytes": self.max_size}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["max_bytes"])


def _nbytes(array: np.ndarray) -> int:
    return array.nbytes


def doc_layers(
    model: Model,
    docs: Sequence[Doc],
    *,
    cache: Optional[LayerCache] = None,
    is_train: bool = False,
) -> Tuple[List[Floats3d], Callable[[List[Floats3d]], List]]:
    """One ``(n_layers + 1, len(doc), width)`` array per doc (whitespace rows zero) and a backprop
    into the biLM (``is_train`` bypasses the cache); ``model``'s weights read first if none."""
    bilm = initialized(model).bilm
    settings = bilm_settings(model)
    ops = model.ops
    texts = [[token.text for token in doc] for doc in docs]
    outputs = [ops.alloc3f(bilm.n_output_layers, len(doc), bilm.output_dim) for doc in docs]
    sequences = [
        (d, rows)
        for d, doc in enumerate(docs)
        for rows in split_sequences(doc, settings.max_sequence_length, texts[d])
    ]
    words = [[texts[d][i] for i in rows] for d, rows in sequences]
    todo = []
    for k, (d, rows) in enumerate(sequences):
        cached = cache.get(tuple(words[k])) if cache is not None and not is_train else None
        if cached is None:
            todo.append(k)
        else:
            outputs[d][:, rows] = ops.asarray(cached)
    backprops = []
    for batch in batch_by_length([len(sequences[k][1]) for k in todo], settings.max_batch_tokens):
        ks = [todo[b] for b in batch]
        if is_train:
            arrays, backprop_batch = model.begin_update([words[k] for k in ks])
            backprops.append((ks, backprop_batch))
        else:
            arrays = model.predict([words[k] for k in ks])
        for k, layers in zip(ks, arrays):
            d, rows = sequences[k]
            outputs[d][:, rows] = layers
            if cache is not None and not is_train:
                cache.put(tuple(words[k]), ops.to_numpy(layers))

    def backprop(d_outputs: List[Floats3d]) -> List:
        for ks, backprop_batch in backprops:
            backprop_batch([d_outputs[sequences[k][0]][:, sequences[k][1]] for k in ks])
        return []

    return outputs, backprop
