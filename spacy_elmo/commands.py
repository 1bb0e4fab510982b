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
from .cli_weights import OPTIONS_FILE, WEIGHT_FILE, WEIGHTS, weight_settings
from .formats import OPTIONS_NAME
from .formats.bilm_tf import HDF5_NAME, export_bilm_tf
from .formats.native import SAFETENSORS_NAME, save_bilm
from .indexers import ByteIndexer
from .sources import load_bilm, load_bilm_from, resolve_weight_source

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

DEMO_SENTENCES = Path(__file__).parent / "data" / "demo_sentences.txt"
DEMO_QUERIES = (
    "They walked along the bank and watched the river flow past .",
    "She asked the bank for a loan to buy a car .",
)
CHECK_SENTENCE = ["Converted", "weights", "must", "give", "the", "same", "vectors", "."]

THREADS_HELP = "PyTorch threads for the biLM (more help only on cores no other process uses)"


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

    bilm-tf layout: options.json + weights.hdf5 (what AllenNLP reads); native checkpoint:
    options.json + model.safetensors. The converted model is checked to give the same vectors.
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
    word: str = typer.Option("bank", "--word", help="The ambiguous word to look up"),
    queries: List[str] = typer.Option(
        list(DEMO_QUERIES), "--query", help="A sentence using --word (repeat the option for more)"
    ),
    top_k: int = typer.Option(5, "--top-k", help="Neighbours to show per query"),
    threads: int = typer.Option(1, "--threads", min=1, help=THREADS_HELP),
) -> None:
    """Show contextual nearest neighbours of an ambiguous word (default: "bank").

    The same word gets different vectors in different sentences. For each query sentence, list
    the corpus tokens whose ELMo vectors are closest (cosine) to the query word's vector, shown in
    their own sentences, next to the neighbours by the context-free token layer.
    """
    nlp = _elmo_pipeline({**weight_settings(weights, options_file, weight_file), "threads": threads}, "en")
    corpus = [line for line in DEMO_SENTENCES.read_text(encoding="utf-8").splitlines() if line.strip()]
    corpus_docs = list(nlp.pipe(corpus))
    query_docs = list(nlp.pipe(queries))
    tokens = [token for doc in corpus_docs for token in doc if token.is_alpha]
    matrix = _unit_rows(np.stack([token._.elmo for token in tokens]))
    token_layer = _unit_rows(np.stack([token.doc._.elmo_layers[0, token.i] for token in tokens]))
    elmo = nlp.get_pipe("elmo")
    weights = ", ".join(f"{w:.2f}" for w in elmo.layer_weights())
    typer.echo(
        f"ELMo: {elmo.bilm.n_output_layers} layers of width {elmo.bilm.output_dim}; {len(tokens)} "
        f"corpus tokens from {len(corpus_docs)} sentences; vectors = the pipe's mix, layer "
        f"weights [{weights}] (token layer first)\n"
    )
    targets = []
    for doc in query_docs:
        target = next((t for t in doc if t.lower_ == word.lower()), None)
        if target is None:
            fail(f"the query {doc.text!r} does not contain the word {word!r}")
        targets.append(target)
        typer.echo(f"Query: {_mark(doc, target.i)}")
        for label, vectors, query_vector in (
            ("ELMo (in context)", matrix, target._.elmo),
            ("token layer only ", token_layer, target.doc._.elmo_layers[0, target.i]),
        ):
            scores = vectors @ _unit_rows(query_vector[None])[0]
            best = np.argsort(-scores)[:top_k]
            typer.echo(f"  {label}:")
            for rank, k in enumerate(best, 1):
                neighbour = tokens[k]
                typer.echo(f"    {rank}. {scores[k]:.3f}  {_mark(neighbour.doc, neighbour.i)}")
        typer.echo("")
    if len(targets) > 1:
        first, second = targets[:2]
        typer.echo(
            f"cosine of the two {word!r} vectors: ELMo {first.similarity(second):.3f}, "
            f"token layer {_cosine(first.doc._.elmo_layers[0, first.i], second.doc._.elmo_layers[0, second.i]):.3f}"
        )


def _elmo_pipeline(model_settings: Dict[str, object], lang: str, **pipe_settings) -> "Language":
    """A blank pipeline of ``lang`` with the elmo pipe, its weights read now. ``model_settings``:
    keys of the pipe's model block (``weight_settings`` and any other); ``pipe_settings``: the
    pipe's own keys."""
    import spacy

    nlp = spacy.blank(lang)
    config = {"model": model_settings, **pipe_settings}
    try:
        nlp.add_pipe("elmo", config=config).initialize()  # reads the weights now
    except (ValueError, FileNotFoundError) as err:  # a bad setting or file, no model to load
        fail(str(err))
    return nlp


def _layers(bilm, words: List[str]) -> np.ndarray:
    with torch.no_grad():
        return bilm(torch.from_numpy(bilm.batch_to_ids([words])))[0].numpy()


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(_unit_rows(a[None])[0] @ _unit_rows(b[None])[0])


def _mark(doc: "Doc", i: int) -> str:
    return "".join(
        f"[{token.text}]{token.whitespace_}" if token.i == i else token.text_with_ws for token in doc
    ).strip()
