"""``python -m spacy_elmo embed``: the command, in one process or under ``torchrun``. The ranks talk
once, at the start (rank 0's verdict, ``embedding/job.py``); then each writes its own chunks, and
rank 0 waits for the others' files, merges them and removes the parts. The jobs themselves live in
``spacy_elmo.embedding``.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import NoReturn, Optional, Tuple

import typer

from ..distributed import DistributedContext, env_rank
from ..embedding.chunks import finished_chunks, parts_folder, remove_temporaries
from ..embedding.interruption import Interrupted, interruption_report, stop_on_signals
from ..embedding.items import open_input
from ..embedding.job import EmbedOptions, JobPlan, JobRefused, prepare_job
from ..embedding.merge import merge_chunks
from ..embedding.progress import JobProgress
from ..embedding.worker import RankFailure, embed_own_chunks
from ..files import write_json_atomically
from .errors import CommandFailed, fail, recorded
from .weights import OPTIONS_FILE, PRECISION, WEIGHT_FILE, WEIGHTS, elmo_pipeline

THREADS_HELP = "Threads each process's biLM splits its batches over, PyTorch ops on one thread each (more help only on cores no other process uses)"


@recorded
def embed(
    input_path: Path = typer.Argument(
        ..., help='A text file (one sentence per line), a .jsonl file (the "text" of each line) or a .spacy file (DocBin)'
    ),
    output_path: Path = typer.Argument(..., help="The HDF5 file to write"),
    layers: str = typer.Option("all", "--layers", help="all: (n_layers + 1, n, width); top or average: (n, width)"),
    weights: Optional[str] = WEIGHTS,
    options_file: Optional[Path] = OPTIONS_FILE,
    weight_file: Optional[Path] = WEIGHT_FILE,
    lang: Optional[str] = typer.Option(
        None, "--lang", help="Tokenize text lines with spaCy's tokenizer for this language (default: split on whitespace)"
    ),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Sentences per batch"),
    gpu_id: int = typer.Option(
        -1, "--gpu-id", help="GPU to run on; -1 for the CPU. Under torchrun, any id >= 0: each rank (process) on the GPU of its local rank, its number on its machine"
    ),
    forget_sentences: bool = typer.Option(False, "--forget-sentences", help="Do not write the sentence_to_index dataset"),
    use_sentence_keys: bool = typer.Option(
        False, "--use-sentence-keys", help="Name each dataset by its sentence's text (AllenNLP's option)"
    ),
    threads: int = typer.Option(1, "--threads", min=1, help=THREADS_HELP),
    precision: str = PRECISION,
    chunk_size: Optional[int] = typer.Option(
        None, "--chunk-size", min=1, show_default=False,
        help="Sentences per chunk file: the unit of work of a rank (process), of resumption and of progress "
        "(default 1000; fewer for a small input, so that every process gets about 4 chunks)",
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Finish an unfinished run of the same command (same input, model and options)"
    ),
    metrics: Optional[Path] = typer.Option(
        None, "--metrics", help="Also write the run's figures (sentences, tokens, seconds) to this JSON file"
    ),
) -> None:
    """Write ELMo vectors of a text or .spacy file to HDF5, as AllenNLP's elmo command did; in one
    process, or sharded over many under torchrun (one GPU, or one CPU thread, per rank):
    torchrun --nproc-per-node N -m spacy_elmo embed INPUT OUT.hdf5 ...

    Under torchrun each process is a rank (numbered from 0): rank 0 shows the progress and
    merges; every rank embeds its own chunks.

    One dataset per sentence, named by its number ("0", "1", ...), plus "sentence_to_index", a
    JSON object mapping each sentence's text to its dataset name. With --use-sentence-keys the
    datasets are named by the sentences' texts instead (no sentence_to_index); a sentence that
    repeats, is empty, or holds "/" (a group separator in HDF5) cannot be a name and stops the run
    before it starts.

    A text file has one sentence per line, split on whitespace unless --lang is given (a blank
    line gives an empty dataset, so that dataset names stay line numbers); a .jsonl file, one
    sentence per line's "text". Every line is read before the run starts: one that is not UTF-8
    (or JSON) is refused, naming it. A .spacy file gives one dataset per sentence of each doc, or
    per doc when the doc has no sentence boundaries; rows of whitespace tokens are zero.

    Chunks of --chunk-size sentences (default 1000; for a small input fewer, so that every
    process gets some) are written to OUT.hdf5.parts/ as they finish, then merged
    into OUT.hdf5 (one self-contained file) and the folder removed. A run that stopped (killed,
    or a rank failed) is finished by the same command with --resume: the chunks on disk are kept,
    whatever the number of processes now. A changed input, model or option is refused, naming it;
    an existing OUT.hdf5 is never overwritten.
    """
    options = EmbedOptions(
        input_path, output_path, layers, weights, options_file, weight_file, lang, batch_size,
        gpu_id, forget_sentences, use_sentence_keys, threads, precision, chunk_size, resume, metrics,
    )
    run_embed(options)


WAIT_SECONDS = 0.5


#: oneDNN (PyTorch's CPU convolutions) caches a compiled primitive per input shape, up to 1,024 of
#: them. The character CNN sees a new shape in almost every batch (the number of distinct tokens),
#: so over a long run the cache fills with primitives that are rarely met again: resident memory
#: grows at no gain in speed (docs/results/implementation.md gives the figures). Off unless the environment says otherwise; read by oneDNN
#: when it makes its first primitive, so it must be set before the biLM first runs.
ONEDNN_CACHE = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "0")


def run_embed(o: EmbedOptions) -> None:
    """The job on this rank: the handshake, this rank's chunks, and on rank 0 the merge."""
    os.environ.setdefault(*ONEDNN_CACHE)
    world_size, rank = int(os.environ.get("WORLD_SIZE", "1")), env_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    prefix = f"rank {rank}: " if world_size > 1 else ""
    if world_size > 1:
        _stop_with_torchrun()
    if o.gpu_id >= 0:
        _use_gpu(local_rank if world_size > 1 else o.gpu_id, o.gpu_id, prefix)
    try:
        context = DistributedContext.from_env(o.gpu_id)
    except RuntimeError as err:
        fail(f"{prefix}{err}")
    plan: Optional[JobPlan] = None
    with stop_on_signals():  # a second signal, during the report or the clean-up, is let pass
        try:
            try:
                plan, verdict, message, chunk_size = _handshake(context, o)
                o = replace(o, chunk_size=chunk_size)
                if verdict == "refused":  # rank 0 said why; one more line per other machine
                    _stop(message, local_rank == 0 and not context.is_main)
                if verdict == "complete":
                    if context.is_main:
                        typer.echo(f"{o.output_path} is complete (the same input, model and options); nothing to do")
                    return
                if plan is not None:
                    for note in plan.notes:
                        typer.echo(note, err=True)
                _work(context, o, plan, prefix)
            finally:
                if plan is not None:
                    plan.release()
                context.shutdown()
        except Interrupted as stop:  # Ctrl-C or SIGTERM: rank 0 says what is done and how to finish
            remove_temporaries(parts_folder(o.output_path), own=True)  # later signals are let pass
            message = f"embed: stopped by {stop}"
            if plan is not None:
                message = interruption_report(stop, parts_folder(o.output_path), o.output_path, plan.n_chunks, plan.total)
                typer.echo(message, err=True)
            raise CommandFailed(message.replace("\n   ", ""), stop.exit_status) from None

def _handshake(
    context: DistributedContext, o: EmbedOptions
) -> Tuple[Optional[JobPlan], str, str, Optional[int]]:
    """Rank 0's verdict on the job, known to every rank: (rank 0's plan, "run" | "complete" |
    "refused", the refusal's message, the chunk size every rank uses)."""
    plan: Optional[JobPlan] = None
    verdict: Tuple[str, str, Optional[int]] = ("run", "", o.chunk_size)
    if context.is_main:
        try:
            plan = prepare_job(o, context.world_size)
            verdict = (plan.status, "", plan.chunk_size)
        except JobRefused as err:
            verdict = ("refused", str(err), o.chunk_size)
            # Said before the others hear it: torchrun stops every worker once one exits.
            typer.echo(f"error: {err}", err=True)
    verdict = context.broadcast_object(verdict)
    return (plan, *verdict)


def _work(context: DistributedContext, o: EmbedOptions, plan: Optional[JobPlan], prefix: str) -> None:
    parts = parts_folder(o.output_path)
    nlp = elmo_pipeline(o.model_settings(), o.lang or "xx", prefix, store_layers=True)
    reader = open_input(o.input_path, o.lang, nlp.vocab)
    progress = JobProgress(parts, plan.total if plan is not None else 0, enabled=context.is_main)
    failure: Optional[RankFailure] = None
    try:
        embed_own_chunks(
            reader, nlp, parts, rank=context.rank, world_size=context.world_size,
            chunk_size=o.chunk_size, batch_size=o.batch_size, layers=o.layers,
            done=finished_chunks(parts), progress=progress,
        )
        if plan is None:  # not rank 0: its chunks are on disk, rank 0 merges
            return
        _wait_for_chunks(parts, plan.n_chunks, progress)
    except RankFailure as err:
        failure = err
    finally:  # the bar ends before any message below it
        embed_seconds = progress.elapsed
        tokens_now = progress.tokens
        progress.close()
    if failure is not None:
        _remove_unfinished_parts(o, plan, context.world_size)
        fail(f"{prefix}{failure}")
    merged = merge_chunks(parts, o.output_path, plan.n_chunks, plan.manifest, o.use_sentence_keys, o.forget_sentences)
    processes = f"{context.world_size} process{'es' if context.world_size > 1 else ''}"
    typer.echo(
        f"wrote {merged.sentences} sentences ({merged.tokens:,} tokens) to {o.output_path}; "
        f"{processes} embedded {tokens_now:,} tokens in {embed_seconds:.1f} s "
        f"({tokens_now / max(embed_seconds, 1e-9):,.0f} tokens/s); merge {merged.seconds:.2f} s"
    )
    if o.metrics is not None:
        write_json_atomically(o.metrics, {
            "sentences": merged.sentences, "tokens": merged.tokens, "processes": context.world_size,
            "embedded_tokens": tokens_now, "embed_seconds": embed_seconds, "merge_seconds": merged.seconds,
        })  # fmt: skip
    if context.world_size > 1 or len(merged.sentences_by_rank) > 1:
        shares = ", ".join(f"rank {rank} {n}" for rank, n in merged.sentences_by_rank.items())
        chunks = f"{plan.n_chunks} chunk{'s' if plan.n_chunks != 1 else ''} of {o.chunk_size}"
        typer.echo(f"sentences embedded per rank ({chunks}): {shares}")


def _remove_unfinished_parts(o: EmbedOptions, plan: Optional[JobPlan], world_size: int) -> None:
    """After a rank's failure, a one-process run that finished no chunk leaves no parts folder."""
    parts = parts_folder(o.output_path)
    if world_size == 1 and plan is not None and not finished_chunks(parts):
        plan.release()
        shutil.rmtree(parts, ignore_errors=True)


def _wait_for_chunks(parts: Path, n_chunks: int, progress: JobProgress) -> None:
    """Until every chunk file exists (torchrun stops all workers if one fails)."""
    while len(finished_chunks(parts) & set(range(n_chunks))) < n_chunks:
        progress.poll(force=True)
        time.sleep(WAIT_SECONDS)
    progress.poll(force=True)


def _stop(message: str, speak: bool) -> NoReturn:
    """The job was refused: exit 1, the message if ``speak``, on every rank (torchrun's report)."""
    if speak:
        fail(message)
    raise CommandFailed(f"error: {message}")


def _use_gpu(device: int, gpu_id: int, prefix: str) -> None:
    """spaCy on GPU ``device``; whether PyTorch sees one is ``DistributedContext.from_env``'s check."""
    import spacy

    try:
        spacy.require_gpu(device)
    except ValueError as err:
        fail(f"{prefix}--gpu-id {gpu_id}: cannot run on the GPU ({err}); use --gpu-id -1 for the CPU")


def _stop_with_torchrun() -> None:
    """Have the kernel stop this worker when torchrun dies (SIGKILLed, it cannot stop its workers,
    which would go on writing beside a resumed run); Linux only."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # torchrun died before the request
        os.kill(os.getpid(), signal.SIGTERM)
