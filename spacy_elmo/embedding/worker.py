"""One rank's work: stream the input, embed the items of its own chunks, write each chunk file. No
rank talks to another; memory stays flat (one batch of docs at a time).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, List, Set, Tuple

import numpy as np
from spacy.util import minibatch

from .chunks import ChunkWriter
from .items import InputItems, Item
from .progress import JobProgress

if TYPE_CHECKING:
    from spacy.language import Language


class RankFailure(Exception):
    """Work that failed on this rank, with where in the input (a line, a doc or a chunk)."""

    def __init__(self, location: str, error: BaseException) -> None:
        super().__init__(f"{location}: {type(error).__name__}: {error}")
        self.location = location


def select_layers(layers: np.ndarray, mode: str) -> np.ndarray:
    """``all``: (n_layers + 1, n, width); ``top``: the last layer; ``average``: their mean."""
    if mode == "top":
        return layers[-1]
    if mode == "average":
        return layers.mean(axis=0)
    return layers


def own_chunks(
    items: Iterable[Item], chunk_size: int, rank: int, world_size: int, done: Set[int]
) -> Iterator[Tuple[int, Iterator[Item]]]:
    """(chunk, its items) for each of this rank's chunks not in ``done``."""
    for chunk, chunk_items in itertools.groupby(items, key=lambda item: item.number // chunk_size):
        if chunk % world_size == rank and chunk not in done:
            yield chunk, chunk_items


def embed_own_chunks(
    reader: InputItems,
    nlp: "Language",
    parts: Path,
    *,
    rank: int,
    world_size: int,
    chunk_size: int,
    batch_size: int,
    layers: str,
    done: Set[int],
    progress: JobProgress,
) -> int:
    """Write every chunk file of this rank; returns the number written. Raises RankFailure."""
    written = 0
    for chunk, items in own_chunks(reader.items(), chunk_size, rank, world_size, done):
        try:
            writer = ChunkWriter(parts, chunk, chunk * chunk_size, rank)
        except OSError as err:
            raise RankFailure(f"chunk {chunk} ({parts})", err) from err
        with writer:
            for batch in minibatch(items, batch_size):
                _embed_batch(reader, nlp, batch, layers, writer, progress)
                progress.poll()
            try:
                writer.finish()
            except OSError as err:
                raise RankFailure(f"chunk {chunk} ({writer.path})", err) from err
        progress.own_chunk(chunk)
        release_free_memory()
        written += 1
    return written


def release_free_memory() -> None:
    """Give the heap's free pages back (glibc's ``malloc_trim``): a fragmented heap never shrinks
    (docs/results/implementation.md)."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            import ctypes

            _MALLOC_TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM: Any = None


def _embed_batch(
    reader: InputItems, nlp: "Language", batch: List[Item], layers: str, writer: ChunkWriter, progress: JobProgress
) -> None:
    docs = []
    for item in batch:
        try:
            docs.append(reader.doc(item, nlp))
        except Exception as err:  # a tokenizer error: name the line
            raise RankFailure(reader.location(item), err) from err
    try:
        processed = list(nlp.pipe((doc for doc, _ in docs), batch_size=len(docs)))
    except Exception as err:  # the biLM ran on the whole batch: name its lines
        raise RankFailure(reader.span_location(batch[0], batch[-1]), err) from err
    tokens = 0
    for doc, (_, key), item in zip(processed, docs, batch):
        try:
            writer.add(select_layers(doc._.elmo_layers, layers), key, len(doc))
        except (OSError, ValueError) as err:
            raise RankFailure(f"{reader.location(item)}, writing {writer.temporary}", err) from err
        tokens += len(doc)
    progress.add(len(batch), tokens)
