"""Labelled texts for text classification as JSON lines (``cats`` or ``label`` per line), as spaCy's
text classification projects keep them: the ``spacy_elmo.TextCatCorpus.v1`` reader that ``spacy
train`` uses and ``convert-textcat`` writes ``.spacy`` files from. Read by ``text_files``, so a bad
line is named with its file and number. The format: docs/reference/config.md.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

from spacy.util import registry
from thinc.api import ConfigValidationError

from .text_files import JSONL_SUFFIX as SUFFIX
from .text_files import TextFileError, json_lines, resolve_files

READER = "spacy_elmo.TextCatCorpus.v1"
#: A record: its line number, its text and its categories.
Record = Tuple[int, str, Dict[str, float]]


def jsonl_files(path: Path) -> List[Path]:
    """``path`` itself (a ``.jsonl`` file), or the ``.jsonl`` files of a directory (``resolve_files``)."""
    files = resolve_files(path, (SUFFIX,))
    wrong = [file for file in files if file.suffix != SUFFIX]
    if wrong:
        raise ValueError(f"{wrong[0]}: expected a {SUFFIX} file of labelled texts (or a directory of them)")
    return files


def read_records(path: Path) -> Iterator[Record]:
    """The labelled texts of one JSONL file, checked line by line (blank lines are skipped)."""
    count = 0
    for number, data in json_lines(path):
        yield number, *_record(path, number, data)
        count += 1
    if not count:
        raise ValueError(f"{path}: no labelled texts (one JSON object a line: {_EXAMPLE})")


_EXAMPLE = '{"text": "...", "label": "LABEL"} or {"text": "...", "cats": {"LABEL": 1.0, "OTHER": 0.0}}'


def _record(path: Path, number: int, data: dict) -> Tuple[str, Dict[str, float]]:
    """The text and categories of a JSON object with a text (``json_lines``), its labels checked."""
    has_label, has_cats = "label" in data, "cats" in data
    if has_label == has_cats:
        both = "both \"label\" and \"cats\"" if has_label else "neither \"label\" nor \"cats\""
        raise TextFileError(path, number, f"{both}; give one of them: {_EXAMPLE}")
    if has_label:
        label = data["label"]
        if not isinstance(label, str) or not label.strip():
            raise TextFileError(path, number, f"\"label\" must be a non-empty string, got {label!r}")
        return data["text"], {label: 1.0}
    cats = data["cats"]
    if not isinstance(cats, dict) or not cats:
        raise TextFileError(path, number, f"\"cats\" must be an object of label -> score (0 to 1), got {cats!r}")
    for label, score in cats.items():
        number_ok = isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score)
        if not label.strip() or not number_ok or not 0.0 <= score <= 1.0:
            raise TextFileError(path, number, f"\"cats\" must map labels to scores from 0 to 1, got {label!r}: {score!r}")
    return data["text"], {label: float(score) for label, score in cats.items()}


def read_docs(path: Path, make_doc: Callable) -> Iterator:
    """A Doc per labelled text of ``path`` (a file or folder), by ``make_doc``, with cats."""
    for file in jsonl_files(path):
        for _, text, cats in read_records(file):
            doc = make_doc(text)
            doc.cats = cats
            yield doc


class TextCatCorpus:
    """spaCy's corpus interface over JSONL files: an Example per labelled text. Every line is read
    when it is made, so that a bad one stops ``spacy train`` before it starts, not at the first
    evaluation of a bad dev file."""

    def __init__(self, path: Path, limit: int = 0) -> None:
        self.files = jsonl_files(path)
        self.limit = limit
        for file in self.files:
            for _ in read_records(file):
                pass

    def __call__(self, nlp) -> Iterator:
        from spacy.training import Example

        docs = (doc for file in self.files for doc in read_docs(file, nlp.make_doc))
        for doc in itertools.islice(docs, self.limit or None):
            yield Example(nlp.make_doc(doc.text), doc)


@registry.readers(READER)
def textcat_corpus(path: Path, limit: int = 0) -> TextCatCorpus:
    """``spacy_elmo.TextCatCorpus.v1``: the texts of ``path``; ``limit`` (0: all). What cannot be
    read is a ConfigValidationError: ``spacy train`` prints its description as one line, unwrapped
    (another error, as a traceback)."""
    try:
        if path is None:
            raise ValueError("no path; set [paths] train and dev, or give --paths.train and --paths.dev to spacy train")
        return TextCatCorpus(Path(path), limit)
    except (ValueError, FileNotFoundError) as err:
        raise ConfigValidationError(title=f"{READER} cannot read its data", desc=str(err), errors=[]) from None


__all__ = ["TextCatCorpus", "jsonl_files", "read_docs", "read_records", "textcat_corpus"]
