"""``--use-sentence-keys``: each dataset named by its sentence's text. A bad or repeated name must
stop the run before any chunk is written, and ranks see only their own chunks, so rank 0 reads every
key once before the job starts.
"""

from __future__ import annotations

from typing import Iterable, Optional, Set, Tuple

RUN_WITHOUT = "run without --use-sentence-keys (datasets named by number, with sentence_to_index)"


def key_problem(text: str, seen: Set[str]) -> Optional[str]:
    """Why ``text`` cannot name a dataset beside the names in ``seen``; None if it can."""
    if not text.strip():
        return "is empty"
    if text in (".", ".."):
        return "is not a valid HDF5 name"
    if "/" in text:
        return 'contains "/", which HDF5 reads as a group separator'
    if text in seen:
        return "repeats an earlier sentence"
    return None


def first_bad_key(keys: Iterable[Tuple[int, str]]) -> Optional[str]:
    """The error for the first (number, text) that cannot name its dataset, or None."""
    seen: Set[str] = set()
    for number, text in keys:
        problem = key_problem(text, seen)
        if problem is not None:
            return (
                f"--use-sentence-keys: sentence {number} ({text!r}) {problem}, so it cannot name "
                f"a dataset; {RUN_WITHOUT}"
            )
        seen.add(text)
    return None
