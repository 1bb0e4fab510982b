"""``python -m spacy_elmo config``: a spaCy training config for components on ELMo, in the manner of
``spacy init config``: the package's ``configs/`` blocks for the components asked for, every other
setting filled by spaCy (docs/guide/own-data.md).
"""

from __future__ import annotations

import copy
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence

import typer

from ..files import replacing
from ..text_files import JSONL_SUFFIX
from ..textcat_jsonl import READER as JSONL_READER
from ..textcat_jsonl import TextCatCorpus
from .errors import fail, failing
from .weights import WEIGHTS, weight_source

if TYPE_CHECKING:
    from thinc.api import Config

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
#: What ``[paths] bilm`` says when no --weights is given: the model bundled with the package.
BUNDLED = "en_wikitext_small"
TEXTCAT = ("textcat", "textcat_multilabel")


def _template(name: str) -> "Config":
    from thinc.api import Config

    return Config().from_disk(CONFIGS / name, interpolate=False)


def components() -> List[str]:
    """The components a config can hold, in the order of ``configs/components.cfg``."""
    return list(_template("components.cfg"))


def training_config(
    pipeline: Sequence[str],
    weights: Optional[str] = None,
    lang: str = "en",
    train: Optional[str] = None,
    dev: Optional[str] = None,
) -> "Config":
    """The filled training config for the components ``pipeline`` on the elmo pipe with ``weights``
    (None: the bundled model); ``train``/``dev`` go into ``[paths]``, JSONL read by
    ``spacy_elmo.TextCatCorpus.v1`` (every line now, as that reader does). Raises ValueError for
    an unknown or repeated component, JSONL data without a text classifier, or a bad JSONL line
    (TextFileError)."""
    from spacy.util import load_model_from_config

    _check_pipeline(pipeline)
    config = _template("training.cfg")
    blocks = _template("components.cfg")
    listener = _template("listener.cfg")["tok2vec"]
    for name in pipeline:
        block = copy.deepcopy(blocks[name])
        block["model"]["tok2vec"] = copy.deepcopy(listener)
        config["components"][name] = block
    config["nlp"]["pipeline"] = ["elmo", *pipeline]
    config["nlp"]["lang"] = lang
    config["paths"]["bilm"] = BUNDLED if weights is None else str(weights)
    for split, path in (("train", train), ("dev", dev)):
        config["paths"][split] = None if path is None else str(path)
        if path is not None and _is_jsonl(Path(path)):
            if not set(pipeline) & set(TEXTCAT):
                raise ValueError(
                    f"{path}: JSONL holds labelled texts for text classification, but the pipeline "
                    f"({', '.join(pipeline)}) has no textcat; for a tagger, ner or parser convert "
                    "the data to .spacy files (python -m spacy convert)"
                )
            TextCatCorpus(Path(path))
            config["corpora"][split] = {"@readers": JSONL_READER, "path": f"${{paths.{split}}}", "limit": 0}
    return load_model_from_config(config, auto_fill=True, validate=True).config


def _check_pipeline(pipeline: Sequence[str]) -> None:
    known = components()
    if not pipeline:
        raise ValueError(f"no components: give --pipeline, one or more of {', '.join(known)}")
    unknown = [name for name in pipeline if name not in known]
    if unknown:
        raise ValueError(
            f"--pipeline: {', '.join(unknown)} unknown; the components that train on ELMo here: "
            f"{', '.join(known)} (a tok2vec is not needed: the elmo pipe takes its place)"
        )
    repeated = sorted({name for name in pipeline if list(pipeline).count(name) > 1})
    if repeated:
        raise ValueError(f"--pipeline: {', '.join(repeated)} given twice")


def _is_jsonl(path: Path) -> bool:
    return path.suffix == JSONL_SUFFIX or (path.is_dir() and any(path.rglob(f"*{JSONL_SUFFIX}")))


def config_text(config: "Config", command: str, output: str) -> str:
    """The config as a file, under a header saying how it was made and how to train on it."""
    paths = "" if config["paths"]["train"] and config["paths"]["dev"] else " --paths.train TRAIN --paths.dev DEV"
    pipeline = [name for name in config["nlp"]["pipeline"] if name != "elmo"]
    header = [
        f"# A spaCy training config: {', '.join(pipeline)} on ELMo ({config['paths']['bilm']}), written by",
        f"#   {command}",
        "# Train it (OMP_NUM_THREADS=1: one PyTorch op thread, the fast path on a CPU; --training.max_steps: a first "
        f"run's budget, the config's own is {config['training']['max_steps']:,}; add --gpu-id 0 for a GPU):",
        f"#   OMP_NUM_THREADS=1 python -m spacy train {output} --output MODEL_DIR{paths} --training.max_steps 2000",
        "# Every setting is spaCy's (https://spacy.io/api/data-formats#config); the elmo pipe and its",
        "# listeners: docs/guide/own-data.md, docs/reference/config.md.",
        "",
    ]
    return "\n".join(header) + config.to_str()


def config_command(
    output_file: str = typer.Argument(..., help="Where to write the config, or - for standard output"),
    pipeline: str = typer.Option(
        ..., "--pipeline", "-p",
        help="Comma-separated components to train on ELMo: tagger, ner, parser, textcat (one label per text), "
        "textcat_multilabel",
    ),
    weights: Optional[str] = WEIGHTS,
    lang: str = typer.Option("en", "--lang", "-l", help="The pipeline's language (its tokenizer)"),
    train: Optional[Path] = typer.Option(
        None, "--train", help="Training data: .spacy file(s) (a file or a directory), or for text classification "
        "a .jsonl file of labelled texts; without it, give --paths.train to spacy train",
    ),
    dev: Optional[Path] = typer.Option(None, "--dev", help="Development data, as --train"),
) -> None:
    """Write a spaCy training config for components on ELMo, as spacy init config does for spaCy's
    own: python -m spacy train CONFIG --output MODEL_DIR trains it.

    Each component gets its own ElmoListener: its own mix of the biLM layers, beside spaCy's hash
    embeddings, with spaCy's CNN encoder on top; the biLM is frozen (the elmo pipe annotates the
    docs, its layers cached after the first epoch). Text classification data may be JSONL, as
    spaCy's text classification projects keep it: {"text": ..., "label": "LABEL"} or
    {"text": ..., "cats": {"LABEL": 1.0, ...}} a line.
    """
    names = [name.strip() for name in pipeline.split(",") if name.strip()]
    weight_source(weights, None, None)  # an unknown name or a damaged file is said now
    for option, path in (("--train", train), ("--dev", dev)):
        if path is not None and not path.exists():
            fail(f"{option} {path}: no such file or directory")
    with failing(ValueError, FileNotFoundError):
        config = training_config(names, weights, lang, train and str(train), dev and str(dev))
    given = [("--pipeline", ",".join(names)), ("--weights", weights), ("--train", train), ("--dev", dev)]
    given += [("--lang", lang)] if lang != "en" else []
    options = " ".join(f"{option} {shlex.quote(str(value))}" for option, value in given if value is not None)
    text = config_text(config, f"python -m spacy_elmo config {shlex.quote(output_file)} {options}", output_file)
    if output_file == "-":
        typer.echo(text)
        return
    Path(output_file).parent.mkdir(parents=True, exist_ok=True)
    with replacing(output_file) as temporary:
        temporary.write_text(text, encoding="utf-8")
    typer.echo(f"Wrote {output_file}: {', '.join(['elmo', *names])}. Train it with:", err=True)
    typer.echo("    " + text.splitlines()[3].lstrip("# "), err=True)
