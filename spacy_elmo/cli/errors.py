"""How every command reports a problem the user can fix: one ``error:`` line, exit status 1. The
commands torchrun runs (``embed``, ``pretrain``) are wrapped in torch's ``record``, which writes
the worker's failure, this line, for torchrun's report (docs/reference/errors.md).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, NoReturn, Type, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])


class CommandFailed(typer.Exit):
    """The command stops with exit status ``code`` after saying why (``message``, what torch's
    ``record`` writes for torchrun's report)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(code)
        self.message = message

    def __str__(self) -> str:
        return self.message


def fail(message: str) -> NoReturn:
    """The ``error:`` line on stderr, then exit status 1."""
    typer.echo(f"error: {message}", err=True)
    raise CommandFailed(f"error: {message}")


@contextlib.contextmanager
def failing(*errors: Type[Exception]) -> Iterator[None]:
    """Any of ``errors`` raised in the block as the command's one error line (exit status 1):
    what a command refuses (a file, a setting, a size) is the user's to fix, not a traceback."""
    try:
        yield
    except errors as err:
        fail(str(err))


def recorded(command: F) -> F:
    """``command`` run under torch's ``record`` where torchrun started it (imported then: PyTorch
    takes seconds to import, which ``--help`` need not wait for)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        from ..distributed import under_torchrun

        if not under_torchrun():
            return command(*args, **kwargs)
        from torch.distributed.elastic.multiprocessing.errors import record

        return record(command)(*args, **kwargs)

    return run  # type: ignore[return-value]
