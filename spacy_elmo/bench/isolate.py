"""Run a measurement in a fresh Python process (``spawn``), so that memory an earlier path freed but
the allocator kept cannot make a later path look cheaper. One process and one pipe, not a
``ProcessPoolExecutor``, whose shutdown turns a Ctrl-C at its start into a ``RuntimeError`` (exit 1
instead of 130).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable, Dict, Iterator, Optional, TypeVar

T = TypeVar("T")

#: Seconds a fresh process gets to end by itself once its result is in (or after SIGTERM).
_JOIN_S = 30


class ProcessDied(RuntimeError):
    """The fresh process ended without a result: killed, or out of memory."""


class RemoteTraceback(Exception):
    """The traceback of an error raised in the fresh process, as its ``__cause__``."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0])


@contextlib.contextmanager
def _environment(env: Optional[Dict[str, str]]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in env or {}}
    os.environ.update(env or {})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _call_and_send(sending: Connection, function: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    """The fresh process: the call's value, or its error and traceback, back through the pipe."""
    try:
        message: tuple = (True, function(*args, **kwargs))
    except BaseException as error:  # a KeyboardInterrupt too: the parent decides what it means
        message = (False, error, traceback.format_exc())
    try:
        sending.send(message)
    except BrokenPipeError:  # the parent is gone (stopped): nobody waits for the result
        pass
    except Exception as unpicklable:  # an error that pickle cannot carry: its text instead
        sending.send((False, RuntimeError(f"{message[1]!r} (not picklable: {unpicklable})"), message[-1]))


def _end(process: multiprocessing.process.BaseProcess) -> None:
    """The process gone: it ends by itself, or after SIGTERM, or after SIGKILL."""
    process.join(_JOIN_S)
    if process.exitcode is None:
        process.terminate()
        process.join(_JOIN_S)
    if process.exitcode is None:
        process.kill()
        process.join()


def run_isolated(
    function: Callable[..., T],
    *args: Any,
    isolate: bool = True,
    env: Optional[Dict[str, str]] = None,
    **kwargs: Any,
) -> T:
    """``function(*args, **kwargs)`` (top-level, picklable) in a new process with ``env`` added, or
    in this one with ``isolate=False`` (tests; ``env`` not applied). Its error is raised here,
    traceback chained; :class:`ProcessDied` if it ended without a result. An interruption here ends
    it too."""
    if not isolate:
        return function(*args, **kwargs)
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=_call_and_send, args=(sending, function, args, kwargs))
    message: Optional[tuple] = None
    try:
        with _environment(env):  # a spawned process starts with the environment of the moment
            process.start()
        sending.close()  # only the child writes: its exit without a message is an EOF here
        message = receiving.recv()
    except EOFError:
        process.join(_JOIN_S)
        raise ProcessDied(f"the measuring process ended without a result (exit code {process.exitcode})") from None
    finally:
        sending.close()
        receiving.close()
        if process.pid is not None:  # started (a Ctrl-C may land before)
            if message is None:
                process.terminate()  # interrupted here: its measurement is of no use
            _end(process)
    if message[0]:
        return message[1]
    raise message[1] from RemoteTraceback(message[2])
