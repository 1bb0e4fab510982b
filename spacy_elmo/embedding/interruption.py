"""A stopped ``embed``: SIGINT or SIGTERM ends the run between two Python operations, the chunk
being written is removed, and rank 0 names the finished chunks and the command that finishes the
job; the exit status is the shell's, 128 + the signal's number.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Iterator, List, Optional

from ..stopping import on_signals
from .chunks import chunk_counts, chunk_path, finished_chunks

#: The signals that stop a run, and how the message calls them.
STOP_SIGNALS = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}


class Interrupted(BaseException):
    """The run was told to stop by ``signum``; a BaseException, as KeyboardInterrupt is, so that an
    ``except Exception`` (or spaCy's error handler) lets it through."""

    def __init__(self, signum: int) -> None:
        super().__init__(STOP_SIGNALS.get(signum, signal.Signals(signum).name))
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block the first SIGINT or SIGTERM raises ``Interrupted``, later ones pass (Ctrl-C
    reaches torchrun's workers twice); ``stopping.on_signals`` installs and restores them."""
    stopping = []

    def interrupt(signum, frame) -> None:
        if not stopping:
            stopping.append(signum)
            raise Interrupted(signum)

    with on_signals(STOP_SIGNALS, interrupt):
        yield


def resume_command(argv: Optional[List[str]] = None) -> str:
    """The command that started this run, with ``--resume`` (under torchrun: one machine's)."""
    argv = list(sys.argv if argv is None else argv)
    args = shlex.join(argv[1:] + ([] if "--resume" in argv else ["--resume"]))
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", "0") or 0)
    if per_node:  # under torchrun
        if int(os.environ.get("WORLD_SIZE", "1")) > per_node:
            return f"the same torchrun command on every machine, ending in: -m spacy_elmo {args}"
        return f"torchrun --standalone --nproc-per-node {per_node} -m spacy_elmo {args}"
    launcher = "spacy-elmo" if Path(argv[0]).name == "spacy-elmo" else "python -m spacy_elmo"
    return f"{launcher} {args}"


def interruption_report(stop: Interrupted, parts: Path, output: Path, n_chunks: int, total: int) -> str:
    """What a stopped run finished, and how to finish it (rank 0's message)."""
    if output.exists() and not parts.exists():  # stopped after the merge: nothing is left to do
        return f"embed: stopped by {stop} after {output} was written in full; nothing is left to do"
    done = finished_chunks(parts)
    sentences = 0
    for chunk in done:
        try:
            sentences += chunk_counts(chunk_path(parts, chunk))[0]
        except OSError:  # renamed into place but unreadable here: counted as a chunk only
            continue
    state = (
        f"all {n_chunks} chunks were finished and being merged into {output}, which was not written"
        if len(done) >= n_chunks
        else f"{len(done)} of {n_chunks} chunks ({sentences:,} of {total:,} sentences) are finished in {parts}"
    )
    return f"embed: stopped by {stop}: {state}. Finish the job with:\n    {resume_command()}"
