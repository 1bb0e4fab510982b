"""What a cache of values computed from weights keys on (the token cache's vectors, int8 copies of
the weights): the one use of PyTorch's tensor version counter.

``Tensor._version`` is the counter autograd keeps to notice in-place changes (it appears in
autograd's errors and notes, but has no public accessor): an optimizer step or
``load_state_dict`` bumps it. ``tests/test_versions.py`` checks that it still does, so that a
PyTorch release that changes it fails there, loudly, instead of serving stale vectors.
"""

from __future__ import annotations

from typing import Iterable, Tuple

import torch


def weights_key(tensors: Iterable[torch.Tensor]) -> Tuple[tuple, ...]:
    """A key that changes when any of ``tensors`` changes in place (its version), is replaced or
    moved (its address and device), or cast (its dtype)."""
    return tuple((t._version, t.data_ptr(), t.dtype, t.device) for t in tensors)
