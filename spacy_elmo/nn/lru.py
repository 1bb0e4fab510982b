"""The package's least-recently-used store, behind its two caches (the pipe's biLM layers, the
runner's token vectors): values by key, the least recently used out once their sizes pass a bound.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable, Optional, Tuple


def one(value: Any) -> int:
    """Every value counts 1: a bound on their number."""
    return 1


class LRU:
    """At most ``max_size`` of ``size(value)`` in all; ``get`` counts hits and misses. Thread-safe:
    each method holds ``lock`` (re-entrant), which a caller holds too for several steps at once.
    Pickles and copies get a lock of their own."""

    def __init__(self, max_size: int, size: Callable[[Any], int] = one) -> None:
        self.max_size = max_size
        self.size = size
        self.total = 0
        self.hits = 0
        self.misses = 0
        self.lock = threading.RLock()
        self._entries: "OrderedDict[Hashable, Any]" = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        del state["lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.lock = threading.RLock()

    def get(self, key: Hashable) -> Optional[Any]:
        """The value (now the most recently used), or None."""
        with self.lock:
            value = self._entries.get(key)
            if value is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Hashable, value: Any) -> None:
        """Keep ``value`` (not if ``key`` is there, or if alone it passes the bound), the least
        recently used out until the rest fits."""
        size = self.size(value)
        with self.lock:
            if size > self.max_size or key in self._entries:
                return
            self._entries[key] = value
            self.total += size
            while self.total > self.max_size:
                self.pop_oldest()

    def pop_oldest(self) -> Tuple[Hashable, Any]:
        """Take out the least recently used entry."""
        with self.lock:
            key, value = self._entries.popitem(last=False)
            self.total -= self.size(value)
            return key, value

    def clear(self) -> None:
        with self.lock:
            self._entries.clear()
            self.total = 0
