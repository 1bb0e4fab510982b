"""What a cache of values computed from weights keys on: the one use of ``Tensor._version`` (no
public accessor; ``tests/test_versions.py`` fails if a PyTorch release changes it;
docs/design.md).
"""

from __future__ import annotations

from typing import Iterable, Tuple

import torch


def weights_key(tensors: Iterable[torch.Tensor]) -> Tuple[tuple, ...]:
    """A key that changes when any of ``tensors`` changes in place, moves or is cast."""
    return tuple((t._version, t.data_ptr(), t.dtype, t.device) for t in tensors)
