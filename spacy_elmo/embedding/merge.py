"""The merge: every chunk's datasets under their global names (numbered here, in chunk order) in one
file, the layout of AllenNLP's ``elmo`` command. Written as ``OUT.hdf5.tmp``, renamed when whole,
then the parts folder removed; a crash leaves the chunks for ``--resume``.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict

import h5py

from ..files import replacing
from .chunks import chunk_keys, chunk_path
from .manifest import JOB_ATTR

SENTENCE_TO_INDEX = "sentence_to_index"


@dataclass
class MergeResult:
    sentences: int
    tokens: int
    seconds: float
    #: Sentences per rank that embedded them (chunks of a resumed run: the rank of their run).
    sentences_by_rank: Dict[int, int] = field(default_factory=dict)


def merge_chunks(
    parts: Path,
    output: Path,
    n_chunks: int,
    manifest: Dict[str, Any],
    use_sentence_keys: bool,
    forget_sentences: bool,
) -> MergeResult:
    """Copy chunks 0 .. n_chunks - 1 of ``parts`` into ``output``, then delete ``parts``."""
    start = time.perf_counter()
    sentence_to_index: Dict[str, str] = {}
    number = tokens = 0
    by_rank: Dict[int, int] = {}
    # Stopped or failed: no half-merged file is left beside the parts.
    with replacing(output, ".tmp") as temporary:
        with h5py.File(temporary, "w") as out:
            out.attrs[JOB_ATTR] = json.dumps(manifest, sort_keys=True)
            for chunk in range(n_chunks):
                with h5py.File(chunk_path(parts, chunk), "r") as source:
                    tokens += int(source.attrs["tokens"])
                    rank = int(source.attrs.get("rank", 0))
                    by_rank[rank] = by_rank.get(rank, 0) + int(source.attrs["sentences"])
                    for position, key in enumerate(chunk_keys(source)):
                        name = key if use_sentence_keys else str(number)
                        source.copy(source[str(position)], out, name=name)
                        sentence_to_index[key] = name
                        number += 1
            if not forget_sentences and not use_sentence_keys:
                index = out.create_dataset(SENTENCE_TO_INDEX, (1,), dtype=h5py.string_dtype())
                index[0] = json.dumps(sentence_to_index)
    shutil.rmtree(parts)
    return MergeResult(number, tokens, time.perf_counter() - start, dict(sorted(by_rank.items())))
