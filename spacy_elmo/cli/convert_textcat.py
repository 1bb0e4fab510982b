"""``python -m spacy_elmo convert-textcat``: labelled texts in JSONL to ``.spacy`` files."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import typer

from ..files import replacing
from ..textcat_jsonl import jsonl_files, read_docs
from .errors import fail, failing


def convert_textcat_command(
    inputs: List[Path] = typer.Argument(..., help="JSONL files of labelled texts, or directories of them"),
    output_dir: Path = typer.Argument(..., help="Where the .spacy files go (one per input file)", file_okay=False),
    lang: str = typer.Option("en", "--lang", help="Tokenize the texts with spaCy's tokenizer for this language"),
) -> None:
    """Convert labelled texts in JSONL (spaCy's text classification format) to .spacy files.

    One JSON object a line: {"text": ..., "label": "LABEL"} (one label per text, textcat) or
    {"text": ..., "cats": {"LABEL": 1.0, "OTHER": 0.0}} (scores per label, textcat_multilabel
    when several hold 1.0). OUTPUT_DIR/NAME.spacy is written for each input NAME.jsonl, for
    spacy evaluate, spacy debug data or your own config; python -m spacy_elmo config reads the
    JSONL files as they are.
    """
    import spacy
    from spacy.tokens import DocBin

    with failing(ValueError, FileNotFoundError, OSError):  # all files checked before any is written
        files = [file for path in inputs for file in jsonl_files(path)]
        nlp = spacy.blank(lang)
        converted = [(file, list(read_docs(file, nlp.make_doc))) for file in files]
    names = [file.stem for file, _ in converted]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        fail(f"several inputs are named {', '.join(twice)}.jsonl: their .spacy files would overwrite each other")
    output_dir.mkdir(parents=True, exist_ok=True)
    for file, docs in converted:
        target = output_dir / f"{file.stem}.spacy"
        with replacing(target) as temporary:
            DocBin(docs=docs, attrs=["ORTH", "SPACY"], store_user_data=False).to_disk(temporary)
        typer.echo(f"{target}: {len(docs)} texts, labels: {_label_counts(docs)}")


def _label_counts(docs: List) -> str:
    counts: Dict[str, int] = {}
    for doc in docs:
        for label, score in doc.cats.items():
            counts[label] = counts.get(label, 0) + (score >= 0.5)
    return ", ".join(f"{label} {n}" for label, n in sorted(counts.items()))
