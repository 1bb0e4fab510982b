"""Commands of ``python -m spacy_elmo`` that drive the weight files and the ``elmo`` pipe:
``convert``, ``embed`` and ``demo``. ``cli.py`` registers them; spaCy is imported only when a
command that needs it runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, Iterator, List, Optional, Tuple

import h5py
import numpy as np
import torch
import typer

from .cli_errors import fail
from .sources import load_bilm, load_bilm_from, resolve_model, resolve_weight_source
from .weights import HDF5_NAME, OPTIONS_NAME, SAFETENSORS_NAME, export_bilm_tf, save_bilm

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span

DEMO_SENTENCES = Path(__file__).parent / "data" / "demo_sentences.txt"
DEMO_QUERIES = (
    "They walked along the bank and watched the river flow past .",
    "She asked the bank for a loan to buy a car .",
)
EMBED_LAYERS = ("all", "top", "average")
CHECK_SENTENCE = ["Converted", "weights", "must", "give", "the", "same", "vectors", "."]

MODEL_PATH_HELP = "A native checkpoint, or a directory with options.json and weights.hdf5"
OPTIONS_HELP = "A released model's options.json (with --weight-file)"
WEIGHTS_HELP = "A released model's weights.hdf5 (with --options-file)"
MODEL_NAME_HELP = "A model in the download cache (python -m spacy_elmo download NAME)"
THREADS_HELP = "PyTorch threads for the biLM (more help only on cores no other process uses)"


def convert(
    source: Path = typer.Argument(
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
    try:
        if source.is_dir() or (not source.exists() and not source.suffix):
            weights = resolve_model(source, what="SOURCE")
        else:
            weights = resolve_weight_source(
                options_file=options_file or source.parent / OPTIONS_NAME, weight_file=source
            )
        bilm = load_bilm_from(weights)
    except (ValueError, FileNotFoundError) as err:
        fail(str(err))
    weight_path, source_format = weights.weight_file, weights.format
    target = to if to != "auto" else ("native" if source_format != "native" else "bilm-tf")
    if target == "bilm-tf" and bilm.options.lexicon is not None:
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


def embed(
    input_path: Path = typer.Argument(
        ..., help="A text file (one sentence per line) or a .spacy file (DocBin)"
    ),
    output_path: Path = typer.Argument(..., help="The HDF5 file to write"),
    layers: str = typer.Option("all", "--layers", help="all: (n_layers + 1, n, width); top or average: (n, width)"),
    model_path: Optional[Path] = typer.Option(None, "--model-path", help=MODEL_PATH_HELP),
    options_file: Optional[Path] = typer.Option(None, "--options-file", help=OPTIONS_HELP),
    weight_file: Optional[Path] = typer.Option(None, "--weight-file", help=WEIGHTS_HELP),
    model_name: Optional[str] = typer.Option(None, "--model-name", help=MODEL_NAME_HELP),
    lang: Optional[str] = typer.Option(
        None, "--lang", help="Tokenize text lines with spaCy's tokenizer for this language (default: split on whitespace)"
    ),
    batch_size: int = typer.Option(64, "--batch-size", help="Docs per batch"),
    gpu_id: int = typer.Option(-1, "--gpu-id", help="GPU to run on; -1 for the CPU"),
    forget_sentences: bool = typer.Option(
        False, "--forget-sentences", help="Do not write the sentence_to_index dataset"
    ),
    use_sentence_keys: bool = typer.Option(
        False, "--use-sentence-keys", help="Name each dataset by its sentence's text (AllenNLP's option)"
    ),
    threads: int = typer.Option(1, "--threads", min=1, help=THREADS_HELP),
) -> None:
    """Write ELMo vectors of a text or .spacy file to HDF5, as AllenNLP's elmo command did.

    One dataset per sentence, named by its number ("0", "1", ...), plus "sentence_to_index", a
    JSON object mapping each sentence's text to its dataset name. With --use-sentence-keys the
    datasets are named by the sentences' texts instead (no sentence_to_index); a sentence that
    repeats, is empty, or holds "/" (a group separator in HDF5) cannot be a name and stops the run.

    A text file has one sentence per line, split on whitespace unless --lang is given (a blank
    line gives an empty dataset, so that dataset names stay line numbers). A .spacy file gives one
    dataset per sentence of each doc, or per doc when the doc has no sentence boundaries; rows of
    whitespace tokens are zero.
    """
    if layers not in EMBED_LAYERS:
        fail(f"--layers must be one of {', '.join(EMBED_LAYERS)}, got {layers!r}")
    if not input_path.is_file():
        fail(f"input file not found: {input_path}")
    if not output_path.parent.is_dir():
        fail(f"cannot write {output_path}: the folder {output_path.parent} does not exist")
    _use_gpu(gpu_id)
    nlp = _elmo_pipeline(
        model_path, options_file, weight_file, lang or "xx", store_layers=True, model_name=model_name, threads=threads
    )
    if input_path.suffix == ".spacy":
        docs, n_docs = _read_docbin(nlp, input_path)
    else:
        docs, n_docs = _read_sentence_lines(nlp, input_path, tokenize=lang is not None)
    from tqdm import tqdm

    sentence_to_index: Dict[str, str] = {}
    n_sentences = 0
    with h5py.File(output_path, "w") as out:
        processed = tqdm(nlp.pipe(docs, batch_size=batch_size, as_tuples=True), total=n_docs, unit="doc")
        for number, (sentence, text) in enumerate(_sentences(processed)):
            n_sentences += 1
            key = _sentence_key(text, number, out, output_path) if use_sentence_keys else str(number)
            all_layers = sentence.doc._.elmo_layers[:, sentence.start : sentence.end]
            if layers == "top":
                data = all_layers[-1]
            elif layers == "average":
                data = all_layers.mean(axis=0)
            else:
                data = all_layers
            out.create_dataset(key, data=np.ascontiguousarray(data, dtype=np.float32))
            sentence_to_index[text] = key
        if not forget_sentences and not use_sentence_keys:
            index = out.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
            index[0] = json.dumps(sentence_to_index)
    typer.echo(f"wrote {n_sentences} sentences to {output_path}")


def _sentence_key(text: str, number: int, out: h5py.File, output_path: Path) -> str:
    """The sentence's text as a dataset name, or exit naming the sentence (and deleting the
    incomplete output file)."""
    problem = None
    if not text.strip() or text in (".", ".."):
        problem = "is empty" if not text.strip() else "is not a valid HDF5 name"
    elif "/" in text:
        problem = 'contains "/", which HDF5 reads as a group separator'
    elif text in out:
        problem = "repeats an earlier sentence"
    if problem is None:
        return text
    out.close()
    output_path.unlink()
    fail(
        f"--use-sentence-keys: sentence {number} ({text!r}) {problem}, so it cannot name a dataset; "
        f"run without --use-sentence-keys (datasets named by number, with sentence_to_index)"
    )


def demo(
    model_path: Optional[Path] = typer.Option(None, "--model-path", help=MODEL_PATH_HELP),
    options_file: Optional[Path] = typer.Option(None, "--options-file", help=OPTIONS_HELP),
    weight_file: Optional[Path] = typer.Option(None, "--weight-file", help=WEIGHTS_HELP),
    model_name: Optional[str] = typer.Option(None, "--model-name", help=MODEL_NAME_HELP),
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
    nlp = _elmo_pipeline(model_path, options_file, weight_file, "en", model_name=model_name, threads=threads)
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


def _elmo_pipeline(
    model_path: Optional[Path],
    options_file: Optional[Path],
    weight_file: Optional[Path],
    lang: str,
    **settings,
) -> "Language":
    import spacy

    config = {
        "model_path": None if model_path is None else str(model_path),
        "options_file": None if options_file is None else str(options_file),
        "weight_file": None if weight_file is None else str(weight_file),
        **settings,
    }
    nlp = spacy.blank(lang)
    try:
        nlp.add_pipe("elmo", config=config).initialize()  # reads the weights now
    except (ValueError, FileNotFoundError) as err:  # a bad setting or file, no model to load
        fail(str(err))
    return nlp


def _read_sentence_lines(
    nlp: "Language", path: Path, tokenize: bool
) -> Tuple[Iterator[Tuple["Doc", Optional[str]]], int]:
    """One doc per line, all of it one sentence, with the stripped line: the sentence's key, as
    in AllenNLP (``doc.text`` of whitespace-split words would join them with single spaces)."""
    from spacy.tokens import Doc

    lines = path.read_text(encoding="utf-8").splitlines()

    def docs() -> Iterator[Tuple[Doc, Optional[str]]]:
        for line in lines:
            if tokenize:
                doc = nlp.make_doc(line.strip())
            else:
                doc = Doc(nlp.vocab, words=line.split())
            for token in doc:
                token.is_sent_start = token.i == 0
            yield doc, line.strip()

    return docs(), len(lines)


def _read_docbin(nlp: "Language", path: Path) -> Tuple[Iterator[Tuple["Doc", Optional[str]]], int]:
    from spacy.tokens import DocBin

    docbin = DocBin().from_disk(path)
    return ((doc, None) for doc in docbin.get_docs(nlp.vocab)), len(docbin)


def _sentences(docs: Iterable[Tuple["Doc", Optional[str]]]) -> Iterator[Tuple["Span", str]]:
    """Each doc's sentences when it has sentence boundaries, else the whole doc as one span
    (an empty doc too, so that text lines and datasets stay aligned), with its key text: the
    doc's own where one came with it (a text line), else the span's."""
    for doc, text in docs:
        if text is not None:
            yield doc[:], text
        elif len(doc) and doc.has_annotation("SENT_START"):
            yield from ((sentence, sentence.text) for sentence in doc.sents)
        else:
            yield doc[:], doc.text


def _use_gpu(gpu_id: int) -> None:
    if gpu_id < 0:
        return
    import spacy

    try:
        spacy.require_gpu(gpu_id)
    except ValueError as err:
        fail(f"--gpu-id {gpu_id}: cannot run on the GPU ({err}); use --gpu-id -1 for the CPU")
    if not torch.cuda.is_available():
        fail(f"--gpu-id {gpu_id}: PyTorch {torch.__version__} sees no CUDA device; use --gpu-id -1")


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
