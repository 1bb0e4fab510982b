"""How a command hears that it should stop, one way for every command: ``on_signals`` installs a
handler for the block and puts the previous ones back after. A signal the process ignores stays
ignored: whoever started it so (``nohup``, a shell's background job) asked for that.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Any, Callable, Iterable, Iterator


@contextlib.contextmanager
def on_signals(signals: Iterable[int], handler: Callable[[int, Any], None]) -> Iterator[None]:
    """``handler(signum, frame)`` for each of ``signals`` the process does not ignore, while the
    block runs."""
    previous = {}
    for signum in signals:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, handler_before in previous.items():
            signal.signal(signum, handler_before)
