"""Commands of ``python -m spacy_elmo`` that drive the weight files and the ``elmo`` pipe:
``convert`` and ``demo`` (``embed`` is ``spacy_elmo.embedding``). ``cli.py`` registers them; spaCy
is imported only when a command that needs it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional

import numpy as np
import torch
import typer

from .cli_errors import fail
from .cli_weights import OPTIONS_FILE, PRECISION, WEIGHT_FILE, WEIGHTS, weight_settings
from .formats import OPTIONS_NAME
from .formats.bilm_tf import HDF5_NAME, export_bilm_tf
from .formats.native import SAFETENSORS_NAME, save_bilm
from .indexers import ByteIndexer
from .sources import load_bilm, load_bilm_from, resolve_weight_source

if TYPE_CHECKING:
    from spacy.language import Language

CHECK_SENTENCE = ["Converted", "weights", "must", "give", "the", "same", "vectors", "."]

THREADS_HELP = "Threads the biLM splits its batches over, PyTorch ops on one thread each (more help only on cores no other process uses)"


def convert(
    source: str = typer.Argument(
        ...,
        help="A model directory (options.json + weights.hdf5 or model.safetensors, or an ELMoForManyLangs model), a weight file, or the name of a downloaded model",
    ),
    output_dir: Path = typer.Argument(..., help="Directory to write the converted model to"),
    options_file: Optional[Path] = typer.Option(
        None, "--options-file", help="options.json of a weight file given as SOURCE (default: the one beside it)"
    ),
    to: str = typer.Option("auto", "--to", help="native | bilm-tf | auto (the format SOURCE is not in)"),
) -> None:
    """Convert a released (bilm-tf HDF5) model to a native checkpoint, or back; or an
    ELMoForManyLangs model directory to a native checkpoint. SOURCE may name a downloaded model
    (python -m spacy_elmo list).

    bilm-tf: the released models' format, named after the TensorFlow code that trained them,
    options.json + weights.hdf5 (what AllenNLP reads). Native checkpoint: this package's own
    format, options.json + model.safetensors (what pretrain writes). The converted model is checked
    to give the same vectors.
    """
    if to not in ("auto", "native", "bilm-tf"):
        fail(f"--to must be native, bilm-tf or auto, got {to!r}")
    path = Path(source)
    try:
        if path.is_file() or options_file is not None:  # a weight file, with its options file
            options = options_file or path.parent / OPTIONS_NAME
            weights = resolve_weight_source(options_file=options, weight_file=path, what="SOURCE")
        else:
            weights = resolve_weight_source(source, what="SOURCE")
        bilm = load_bilm_from(weights)
    except (ValueError, FileNotFoundError) as err:
        fail(str(err))
    weight_path, source_format = weights.weight_file, weights.format
    target = to if to != "auto" else ("native" if source_format != "native" else "bilm-tf")
    if target == "bilm-tf" and not isinstance(bilm.indexer, ByteIndexer):
        fail(f"{source}: an ELMoForManyLangs model converts to a native checkpoint only (--to native)")
    if target == "native":
        save_bilm(bilm, output_dir)
        written = output_dir / SAFETENSORS_NAME
    else:
        export_bilm_tf(bilm, output_dir)
        written = output_dir / HDF5_NAME
    converted = load_bilm(output_dir / OPTIONS_NAME, written)
    difference = float(np.abs(_layers(bilm, CHECK_SENTENCE) - _layers(converted, CHECK_SENTENCE)).max())
    typer.echo(f"{weight_path} ({source_format}) -> {written} ({target})")
    typer.echo(f"largest difference of the biLM layers on a test sentence: {difference:.3g}")
    if difference > 1e-5:
        fail("the converted model does not reproduce the original's vectors")


def demo(
    weights: Optional[str] = WEIGHTS,
    options_file: Optional[Path] = OPTIONS_FILE,
    weight_file: Optional[Path] = WEIGHT_FILE,
    words: List[str] = typer.Option(
        [],
        "--word",
        help="A word of the sense data to show (repeat for more; default: the words whose senses "
        "differ in part of speech)",
        show_default=False,
    ),
    queries: List[str] = typer.Option(
        [],
        "--query",
        help="Your own sentence using a word of the sense data, e.g. bank (repeat for more)",
        show_default=False,
    ),
    threads: int = typer.Option(1, "--threads", min=1, help=THREADS_HELP),
    precision: str = PRECISION,
) -> None:
    """Show which senses of ambiguous words the vectors tell apart, measured.

    Each sentence of the sense benchmark (data/senses.jsonl) is a query: its word's vector is compared
    with the word's other sentences, grouped by sense (mean cosine), in context and with the
    context-free token layer; the right sense wins when its group is closest.
    """
    from .demo import (
        IN_CONTEXT,
        RELEASED_FOR_MEANING,
        demo_words,
        embed_sentences,
        first_of_each_sense,
        format_table,
        format_user_query,
        leave_one_out,
        query_target,
        score_user_queries,
        summary_lines,
    )
    from .hub.cache import download_command
    from .senses import DATA_FILE, read_senses

    settings = weight_settings(weights, options_file, weight_file)
    nlp = elmo_pipeline({**settings, "threads": threads, "precision": precision}, "en")
    sentences = read_senses(DATA_FILE, nlp.tokenizer)
    known = list(dict.fromkeys(s.word for s in sentences))
    unknown = [w for w in words if w not in known]
    if unknown:
        fail(f"--word {', '.join(unknown)}: not in {DATA_FILE.name}; its words: {', '.join(known)}")
    try:  # before the data is embedded and anything printed
        for query in queries:
            query_target(nlp.make_doc(query), known)
    except ValueError as err:
        fail(str(err))
    shown = list(dict.fromkeys(words)) or demo_words(sentences)
    try:
        data = embed_sentences(nlp, sentences)
        mine = score_user_queries(nlp, queries, data)
    except ValueError as err:
        fail(str(err))
    scores = leave_one_out(data)
    elmo = nlp.get_pipe("elmo")
    mix = ", ".join(f"{w:.2f}" for w in elmo.layer_weights())
    typer.echo(
        f"ELMo: {elmo.bilm.n_output_layers} layers of width {elmo.bilm.output_dim}, precision "
        f"{precision}; {IN_CONTEXT} = "
        f"the pipe's vectors (layer weights [{mix}], token layer first); token layer = layer 0, "
        "context-free\n"
    )
    rule = "chosen with --word" if words else "whose senses differ in part of speech"
    typer.echo(
        f"{len(shown)} of the {len(known)} words of the sense benchmark ({DATA_FILE.name}), "
        f"those {rule}.\nEach row: a query sentence (the first of each sense); own / "
        "other = mean cosine of its word to the word in the other sentences of its own sense / of "
        "the other sense; wins = own is higher."
    )
    typer.echo(format_table(first_of_each_sense(scores, shown)) + "\n")
    typer.echo("Every sentence of the data in turn as the query:")
    for line in summary_lines(scores, sentences, shown):
        typer.echo(f"  {line}")
    if weights is None and options_file is None and weight_file is None:
        typer.echo(
            "Senses with the same part of speech (bank: river / money) need a larger released "
            f"model: {download_command(RELEASED_FOR_MEANING)}, then add --weights "
            f"{RELEASED_FOR_MEANING}"
        )
    if mine:
        typer.echo("")
        for query in mine:
            typer.echo(format_user_query(query))


def elmo_pipeline(model_settings: Dict[str, object], lang: str, prefix: str = "", **pipe_settings) -> "Language":
    """A blank pipeline of ``lang`` with the elmo pipe, its weights read now. ``model_settings``:
    keys of the pipe's model block (``weight_settings`` and any other); ``pipe_settings``: the
    pipe's own keys; ``prefix`` starts the error message (a rank's name under torchrun).

    For a command, which owns its process: PyTorch runs its ops on one thread, set once here, and
    the biLM splits its batches over the model's ``threads`` (``--threads``)."""
    import spacy

    from . import pipe  # noqa: F401  registers the factory where no entry point does (a checkout)

    torch.set_num_threads(1)
    nlp = spacy.blank(lang)
    config = {"model": model_settings, **pipe_settings}
    try:
        nlp.add_pipe("elmo", config=config).initialize()  # reads the weights now
    except (ValueError, OSError) as err:  # a bad setting or file, no model to load
        fail(f"{prefix}{err}")
    return nlp


def _layers(bilm, words: List[str]) -> np.ndarray:
    with torch.no_grad():
        return bilm(torch.from_numpy(bilm.batch_to_ids([words])))[0].numpy()
