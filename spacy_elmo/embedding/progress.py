"""One progress bar for the whole job, on rank 0. The ranks share nothing while they work (a
collective would wait on the slowest), so rank 0 counts the others' chunk files as they appear in
the parts folder.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Set

from .chunks import chunk_counts, chunk_path, finished_chunks

POLL_SECONDS = 1.0


class JobProgress:
    """The bar (tqdm on stderr) over ``total`` sentences; chunks already on disk count as done."""

    def __init__(self, parts: Path, total: int, enabled: bool) -> None:
        self.parts = parts
        self.enabled = enabled
        self.seen: Set[int] = set()
        self.tokens = 0
        self.start = time.perf_counter()
        self._last_poll = 0.0
        self.bar = None
        if not enabled:
            return
        from tqdm import tqdm

        done = 0
        for chunk in finished_chunks(parts):
            self.seen.add(chunk)
            done += chunk_counts(chunk_path(parts, chunk))[0]
        self.bar = tqdm(total=total, initial=done, unit="sent", dynamic_ncols=True)

    def add(self, sentences: int, tokens: int) -> None:
        """Rank 0's own sentences, as each batch finishes."""
        self.tokens += tokens
        if self.bar is not None:
            self.bar.update(sentences)
            self._postfix()

    def own_chunk(self, chunk: int) -> None:
        """A chunk rank 0 wrote: already counted batch by batch."""
        self.seen.add(chunk)

    def poll(self, force: bool = False) -> None:
        """Count the chunk files other ranks finished (at most once a second unless ``force``)."""
        now = time.perf_counter()
        if self.bar is None or (not force and now - self._last_poll < POLL_SECONDS):
            return
        self._last_poll = now
        for chunk in sorted(finished_chunks(self.parts) - self.seen):
            try:
                sentences, tokens = chunk_counts(chunk_path(self.parts, chunk))
            except OSError:  # renamed into place but not readable yet (a network file system)
                continue
            self.seen.add(chunk)
            self.tokens += tokens
            self.bar.update(sentences)
        self._postfix()

    def _postfix(self) -> None:
        assert self.bar is not None
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        self.bar.set_postfix_str(f"{self.tokens / elapsed:,.0f} tokens/s", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start
