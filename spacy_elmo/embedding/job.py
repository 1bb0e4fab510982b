"""The start of a job, decided once on rank 0 and sent to every rank, so all stop with the same
message before any model is loaded: a new job, the resumption of an unfinished one (its manifest
must be this job's), a complete one, or a refusal. Rank 0 holds an advisory lock on the parts
folder, so a second run on the same output is refused rather than interleaved.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import shlex
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional

import h5py

from ..architectures import elmo_model_v2
from ..files import write_json_atomically
from ..layers.bilm_model import ElmoModelSettings, bilm_settings
from ..nn.precision import get_precision
from ..sources import resolve_weight_source, weight_keys
from ..text_files import TextFileError
from .chunks import finished_chunks, parts_folder, remove_temporaries
from .items import InputItems, open_input
from .keys import first_bad_key
from .manifest import JOB_ATTR, MANIFEST_NAME, build_manifest, differences, read_manifest

EMBED_LAYERS = ("all", "top", "average")
LOCK_NAME = "lock"
#: The chunk size when --chunk-size is not given, for inputs large enough to share it.
DEFAULT_CHUNK_SIZE = 1000
#: Without --chunk-size, a small input is cut so that each rank gets about this many chunks.
CHUNKS_PER_RANK = 4


class JobRefused(Exception):
    """The job cannot start; the message says why and what to do."""


@dataclass(frozen=True)
class EmbedOptions:
    """What the ``embed`` command was given."""

    input_path: Path
    output_path: Path
    layers: str = "all"
    weights: Optional[str] = None
    options_file: Optional[Path] = None
    weight_file: Optional[Path] = None
    lang: Optional[str] = None
    batch_size: int = 64
    gpu_id: int = -1
    forget_sentences: bool = False
    use_sentence_keys: bool = False
    threads: int = 1
    precision: str = "fp32"
    #: None: ``auto_chunk_size`` of the input and the number of ranks (a resumed run keeps its own).
    chunk_size: Optional[int] = None
    resume: bool = False
    #: Where to write the run's figures as JSON (None: only printed).
    metrics: Optional[Path] = None

    def model_settings(self) -> Dict[str, Any]:
        """The keys of the elmo pipe's model block this command sets."""
        weights = weight_keys(self.weights, self.options_file, self.weight_file)
        return {**weights, "precision": self.precision, "threads": self.threads}

    def output_options(self, settings: ElmoModelSettings) -> Dict[str, Any]:
        """The settings that change the output's numbers or names (the manifest compares them)."""
        return {
            "layers": self.layers,
            "lang": self.lang,
            "use_sentence_keys": self.use_sentence_keys,
            "forget_sentences": self.forget_sentences,
            "chunk_size": self.chunk_size,
            "precision": settings.precision,
            "max_sequence_length": settings.max_sequence_length,
            "token_cache_words": settings.token_cache_words,
        }


@dataclass
class JobPlan:
    """Rank 0's view of the job: ``status`` ("run", "complete") and the ``chunk_size`` it uses."""

    status: str
    parts: Path
    manifest: Dict[str, Any]
    chunk_size: int = DEFAULT_CHUNK_SIZE
    total: int = 0
    n_chunks: int = 0
    notes: List[str] = field(default_factory=list)
    lock: Optional[int] = None

    def release(self) -> None:
        """Let go of the parts folder's lock (a process's exit does too)."""
        if self.lock is not None:
            os.close(self.lock)
            self.lock = None


def auto_chunk_size(total: int, world_size: int) -> int:
    """Without --chunk-size: at most 1000, about ``CHUNKS_PER_RANK`` chunks per rank."""
    return max(1, min(DEFAULT_CHUNK_SIZE, math.ceil(total / (world_size * CHUNKS_PER_RANK))))


def _checked_options(o: EmbedOptions):
    """``(WeightSource, ElmoModelSettings)`` of the options, or JobRefused naming the one at fault."""
    if o.layers not in EMBED_LAYERS:
        raise JobRefused(f"--layers must be one of {', '.join(EMBED_LAYERS)}, got {o.layers!r}")
    if not o.input_path.is_file():
        raise JobRefused(f"input file not found: {o.input_path}")
    if not o.output_path.parent.is_dir():
        raise JobRefused(f"cannot write {o.output_path}: the folder {o.output_path.parent} does not exist")
    try:
        get_precision(o.precision, "--precision")
        source = resolve_weight_source(o.weights, o.options_file, o.weight_file, what="--weights")
        return source, bilm_settings(elmo_model_v2(**o.model_settings()))  # checked, reads nothing
    except (ValueError, FileNotFoundError) as err:
        raise JobRefused(str(err)) from None


def prepare_job(options: EmbedOptions, world_size: int = 1) -> JobPlan:
    """Check everything, read the input once and set up the parts folder; raises JobRefused."""
    o = options
    source, settings = _checked_options(o)
    reader = _reader(o)
    parts = parts_folder(o.output_path)
    if o.chunk_size is None:  # a run being resumed (or checked) keeps its own
        o = replace(o, chunk_size=_recorded_chunk_size(o, parts))
    manifest = build_manifest(o.input_path, reader.kind, source, o.output_options(settings))
    if o.output_path.exists():
        return _finished_output(o, parts, manifest)
    notes = []
    if parts.exists() and _remove_if_nothing_finished(parts):
        notes.append(f"removed {parts}: an earlier run stopped before it finished any chunk")
    if parts.exists() and not o.resume:
        _check_manifest(read_manifest(parts / MANIFEST_NAME), manifest, parts)
        raise JobRefused(
            f"{parts} holds an unfinished embed run of this job: add --resume to finish it, or "
            f"remove the folder to start over: rm -r {shlex.quote(str(parts))}"
        )
    lock = None
    if parts.exists():
        _check_manifest(read_manifest(parts / MANIFEST_NAME), manifest, parts)
        lock = _lock(parts)
    elif o.resume:
        notes.append(f"--resume: no unfinished run for {o.output_path}; starting one")
    try:
        total = _count_and_check_keys(reader, o.use_sentence_keys)
    except JobRefused:
        if lock is not None:
            os.close(lock)
        raise
    if o.chunk_size is None:
        o = replace(o, chunk_size=auto_chunk_size(total, world_size))
        manifest["compared"]["chunk_size"] = o.chunk_size
    n_chunks = math.ceil(total / o.chunk_size)
    plan = JobPlan("run", parts, manifest, o.chunk_size, total, n_chunks, notes, lock)
    if n_chunks < world_size:
        notes.append(_idle_ranks_note(total, n_chunks, world_size, o.chunk_size))
    if lock is not None:
        remove_temporaries(parts)
        o.output_path.with_name(o.output_path.name + ".tmp").unlink(missing_ok=True)
        done = len(finished_chunks(parts))
        notes.append(f"resuming: {done} of {plan.n_chunks} chunks of {o.chunk_size} sentences are done")
    else:
        try:
            parts.mkdir()
        except FileExistsError:
            raise JobRefused(f"another embed run has just created {parts}") from None
        plan.lock = _lock(parts)
        write_json_atomically(parts / MANIFEST_NAME, manifest)
    return plan


def _recorded_chunk_size(o: EmbedOptions, parts: Path) -> Optional[int]:
    """The chunk size of the run whose parts folder or finished output is there, if any."""
    try:
        if parts.is_dir():
            manifest = read_manifest(parts / MANIFEST_NAME)
        elif o.output_path.is_file():
            with h5py.File(o.output_path, "r") as f:
                manifest = json.loads(f.attrs[JOB_ATTR]) if JOB_ATTR in f.attrs else None
        else:
            return None
    except (OSError, ValueError):
        return None  # the checks that follow say what is wrong with it
    return (manifest or {}).get("compared", {}).get("chunk_size")


def _idle_ranks_note(total: int, n_chunks: int, world_size: int, chunk_size: int) -> str:
    return (
        f"{total} sentences make {n_chunks} chunk{'s' if n_chunks != 1 else ''} of {chunk_size}: "
        f"only {n_chunks} of the {world_size} processes get work (a smaller --chunk-size, or none, "
        "shares it out)"
    )


def _reader(o: EmbedOptions) -> InputItems:
    import spacy

    try:
        vocab = spacy.blank(o.lang or "xx").vocab
    except (ImportError, ValueError, KeyError) as err:
        raise JobRefused(f"--lang {o.lang}: {err}") from None
    try:
        return open_input(o.input_path, o.lang, vocab)
    except (OSError, ValueError) as err:
        raise JobRefused(f"cannot read {o.input_path}: {err}") from None


def _finished_output(o: EmbedOptions, parts: Path, manifest: Dict[str, Any]) -> JobPlan:
    """``OUT.hdf5`` exists: complete if ``--resume`` and this job wrote it, else refused."""
    if not o.resume:
        raise JobRefused(
            f"{o.output_path} exists: embed does not overwrite; remove it or write to another file"
        )
    try:
        with h5py.File(o.output_path, "r") as f:
            recorded = f.attrs.get(JOB_ATTR)
    except OSError as err:
        raise JobRefused(f"{o.output_path} exists and is not a readable HDF5 file ({err})") from None
    if recorded is None:
        raise JobRefused(f"--resume: {o.output_path} exists and no resumable embed run wrote it")
    old = json.loads(recorded)
    found = differences(old, manifest)
    if found:
        raise JobRefused(
            f"--resume: {o.output_path} is the complete output of a different job ("
            + "; ".join(found) + ")"
        )
    if parts.exists():  # the merge finished, its clean-up did not
        shutil.rmtree(parts, ignore_errors=True)
    return JobPlan("complete", parts, manifest, o.chunk_size or DEFAULT_CHUNK_SIZE)


def _check_manifest(old: Optional[Dict[str, Any]], new: Dict[str, Any], parts: Path) -> None:
    """Refuse to continue a parts folder of another job, saying what differs and what to do."""
    start_over = f"rm -r {shlex.quote(str(parts))}, then run the same command without --resume"
    if old is None:
        raise JobRefused(f"{parts} has no readable {MANIFEST_NAME}; to start over: {start_over}")
    found = differences(old, new)
    if found:
        n_done = len(finished_chunks(parts))
        raise JobRefused(
            f"the unfinished run in {parts} was started for a different job ("
            + "; ".join(found)
            + f"): its {n_done} finished chunk(s) hold vectors of that job, which --resume cannot "
            f"mix with this one. To embed this input, start over: {start_over}; or give the same "
            "input, model and options with --resume to finish the earlier job"
        )


def _remove_if_nothing_finished(parts: Path) -> bool:
    """Remove an unlocked parts folder with no finished chunk; whether it was removed."""
    if finished_chunks(parts):
        return False
    descriptor = _lock(parts)  # refused while another run holds it
    try:
        if finished_chunks(parts):
            return False
        shutil.rmtree(parts)
        return True
    finally:
        os.close(descriptor)


def _count_and_check_keys(reader: InputItems, use_sentence_keys: bool) -> int:
    """The number of sentences, every line read (a bad one refused, naming it); with sentence
    keys, every key checked as well."""
    total = 0

    def keys():
        nonlocal total
        for item in reader.items():
            total += 1
            yield item.number, reader.key(item)

    try:
        if not use_sentence_keys:
            return sum(1 for _ in reader.items())
        problem = first_bad_key(keys())
    except TextFileError as err:
        raise JobRefused(str(err)) from None
    if problem is not None:
        raise JobRefused(problem)
    return total


def _lock(parts: Path) -> int:
    """An exclusive lock on the parts folder, held until this process exits."""
    descriptor = os.open(parts / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise JobRefused(f"another embed run is writing {parts} (it holds {parts / LOCK_NAME})") from None
    except OSError:  # a file system without locks: go on without one
        pass
    return descriptor

