"""How every command reports a problem the user can fix: one ``error:`` line, exit status 1; under
torchrun also the worker's error file, which torchrun shows last in its failure report
(docs/reference/errors.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Iterator, NoReturn, Type

import typer

#: The file torchrun asks each worker to describe its failure in (torch.distributed.elastic).
ERROR_FILE_VARIABLE = "TORCHELASTIC_ERROR_FILE"


def fail(message: str) -> NoReturn:
    report_error(message)
    raise typer.Exit(1)


@contextlib.contextmanager
def failing(*errors: Type[Exception]) -> Iterator[None]:
    """Any of ``errors`` raised in the block as the command's one error line (exit status 1):
    what a command refuses (a file, a setting, a size) is the user's to fix, not a traceback."""
    try:
        yield
    except errors as err:
        fail(str(err))


def report_error(message: str) -> None:
    """The ``error:`` line on stderr (and for torchrun's report), without exiting yet."""
    typer.echo(f"error: {message}", err=True)
    record_for_torchrun(f"error: {message}")


def record_for_torchrun(line: str) -> None:
    """Write ``line`` as this worker's failure for torchrun's report (nothing outside torchrun), in
    the format torch's ``ProcessFailure`` reads; ``timestamp`` decides the root cause."""
    path = os.environ.get(ERROR_FILE_VARIABLE)
    if not path:
        return
    try:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"message": line, "timestamp": int(time.time())}, handle)
    except OSError:
        pass  # the report then shows torchrun's own placeholder; the line was printed above
