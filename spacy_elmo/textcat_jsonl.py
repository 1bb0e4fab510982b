"""Labelled texts for text classification as JSON lines (``cats`` or ``label`` per line), as spaCy's
text classification projects keep them: the ``spacy_elmo.TextCatCorpus.v1`` reader that ``spacy
train`` uses and ``convert-textcat`` writes ``.spacy`` files from. A bad line is named with its file
and number. The format: docs/reference/config.md.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

from spacy.util import registry

SUFFIX = ".jsonl"
#: A record: its line number, its text and its categories.
Record = Tuple[int, str, Dict[str, float]]


def jsonl_files(path: Path) -> List[Path]:
    """``path`` itself (a ``.jsonl`` file), or the ``.jsonl`` files of a directory, sorted."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob(f"*{SUFFIX}") if p.is_file())
        if not files:
            raise FileNotFoundError(f"{path}: no {SUFFIX} files in this directory")
        return files
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if path.suffix != SUFFIX:
        raise ValueError(f"{path}: expected a {SUFFIX} file of labelled texts (or a directory of them)")
    return [path]


def read_records(path: Path) -> Iterator[Record]:
    """The labelled texts of one JSONL file, checked line by line (blank lines are skipped)."""
    count = 0
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            yield number, *_record(path, number, line)
            count += 1
    if not count:
        raise ValueError(f"{path}: no labelled texts (one JSON object a line: {_EXAMPLE})")


_EXAMPLE = '{"text": "...", "label": "LABEL"} or {"text": "...", "cats": {"LABEL": 1.0, "OTHER": 0.0}}'


def _record(path: Path, number: int, line: str) -> Tuple[str, Dict[str, float]]:
    where = f"{path}, line {number}"
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: not JSON ({err.msg}); expected {_EXAMPLE}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object, {_EXAMPLE}; got {line.strip()[:60]!r}")
    text = data.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{where}: \"text\" must be a non-empty string, got {text!r}")
    has_label, has_cats = "label" in data, "cats" in data
    if has_label == has_cats:
        both = "both \"label\" and \"cats\"" if has_label else "neither \"label\" nor \"cats\""
        raise ValueError(f"{where}: {both}; give one of them: {_EXAMPLE}")
    if has_label:
        label = data["label"]
        if not isinstance(label, str) or not label.strip():
            raise ValueError(f"{where}: \"label\" must be a non-empty string, got {label!r}")
        return text, {label: 1.0}
    cats = data["cats"]
    if not isinstance(cats, dict) or not cats:
        raise ValueError(f"{where}: \"cats\" must be an object of label -> score (0 to 1), got {cats!r}")
    for label, score in cats.items():
        number_ok = isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score)
        if not label.strip() or not number_ok or not 0.0 <= score <= 1.0:
            raise ValueError(f"{where}: \"cats\" must map labels to scores from 0 to 1, got {label!r}: {score!r}")
    return text, {label: float(score) for label, score in cats.items()}


def read_docs(path: Path, make_doc: Callable) -> Iterator:
    """A Doc per labelled text of ``path`` (a file or folder), by ``make_doc``, with cats."""
    for file in jsonl_files(path):
        for _, text, cats in read_records(file):
            doc = make_doc(text)
            doc.cats = cats
            yield doc


class TextCatCorpus:
    """spaCy's corpus interface over JSONL files: an Example per labelled text."""

    def __init__(self, path: Path, limit: int = 0) -> None:
        self.files = jsonl_files(path)  # a missing file is named when the config is resolved
        self.limit = limit

    def __call__(self, nlp) -> Iterator:
        from spacy.training import Example

        docs = (doc for file in self.files for doc in read_docs(file, nlp.make_doc))
        for doc in itertools.islice(docs, self.limit or None):
            yield Example(nlp.make_doc(doc.text), doc)


@registry.readers("spacy_elmo.TextCatCorpus.v1")
def textcat_corpus(path: Path, limit: int = 0) -> TextCatCorpus:
    """``spacy_elmo.TextCatCorpus.v1``: the texts of ``path``; ``limit`` (0: all)."""
    if path is None:
        raise ValueError(
            "spacy_elmo.TextCatCorpus.v1: no path; set [paths] train and dev, or give "
            "--paths.train and --paths.dev to spacy train"
        )
    return TextCatCorpus(Path(path), limit)


__all__ = ["TextCatCorpus", "jsonl_files", "read_docs", "read_records", "textcat_corpus"]
