"""How every command reports a problem the user can fix: one ``error:`` line, exit status 1.

Under torchrun the line is also written to the worker's error file (``TORCHELASTIC_ERROR_FILE``,
which torchrun gives each worker): torchrun then shows it as the ``traceback :`` of its failure
report, the line just above the report's closing ``====`` line, which is the end of what torchrun
prints. torchrun's own traceback and report before it cannot be left out from a worker: torchrun
raises ``ChildFailedError`` in its own process once a worker fails (docs/manual.md, "When a
torchrun job fails").
"""

from __future__ import annotations

import json
import os
import time
from typing import NoReturn

import typer

#: The file torchrun asks each worker to describe its failure in (torch.distributed.elastic).
ERROR_FILE_VARIABLE = "TORCHELASTIC_ERROR_FILE"


def fail(message: str) -> NoReturn:
    report_error(message)
    raise typer.Exit(1)


def report_error(message: str) -> None:
    """The ``error:`` line on stderr (and for torchrun's report), without exiting yet."""
    typer.echo(f"error: {message}", err=True)
    record_for_torchrun(f"error: {message}")


def record_for_torchrun(line: str) -> None:
    """Write ``line`` as this worker's failure for torchrun's report; nothing outside torchrun.

    The format is the one torch's ``ProcessFailure`` reads: a plain-string ``message`` is shown as
    it is, and ``timestamp`` decides which failure the report calls the root cause (the first)."""
    path = os.environ.get(ERROR_FILE_VARIABLE)
    if not path:
        return
    try:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"message": line, "timestamp": int(time.time())}, handle)
    except OSError:
        pass  # the report then shows torchrun's own placeholder; the line was printed above
