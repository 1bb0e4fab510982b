"""The input of ``embed`` as a stream of numbered items, one per sentence, each one dataset. Every
rank streams it all. Text: one item per line, blank lines too (names stay line numbers), read by
``text_files``; JSONL: one per object's ``"text"``. ``.spacy``: one per sentence (or doc); a DocBin
cannot be streamed, so each rank holds its arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional, Tuple, Union

from ..text_files import texts

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span
    from spacy.vocab import Vocab


@dataclass(frozen=True)
class Item:
    """One sentence of the input.

    number: its place in the whole input: the dataset name without ``--use-sentence-keys``.
    source: the line (1-based) or doc (0-based) it comes from, for error messages.
    payload: the line's text; or a sentence (Span) of a decoded doc, or a doc."""

    number: int
    source: int
    payload: Any


class TextLines:
    """A text file, one sentence per line (or a JSONL file, one per ``"text"``), split on
    whitespace or by ``tokenize`` (``--lang``); a line that cannot be read raises TextFileError."""

    kind = "text"

    def __init__(self, path: Path, tokenize: bool) -> None:
        self.path = path
        self.tokenize = tokenize

    def items(self) -> Iterator[Item]:
        for index, (number, text) in enumerate(texts(self.path)):
            yield Item(index, number, text)

    def location(self, item: Item) -> str:
        return f"input line {item.source} ({self.path})"

    def span_location(self, first: Item, last: Item) -> str:
        return f"input lines {first.source}-{last.source} ({self.path})"

    def key(self, item: Item) -> str:
        """The key text: the stripped line."""
        return item.payload.strip()

    def doc(self, item: Item, nlp: "Language") -> Tuple["Doc", str]:
        from spacy.tokens import Doc

        line = item.payload
        doc = nlp.make_doc(line.strip()) if self.tokenize else Doc(nlp.vocab, words=line.split())
        return doc, line.strip()


class DocBinSentences:
    """A ``.spacy`` file: the sentences of its docs (a doc without them is one item)."""

    kind = "spacy"

    def __init__(self, path: Path, vocab: "Vocab") -> None:
        from spacy.tokens import DocBin

        self.path = path
        self.vocab = vocab
        self.docbin = DocBin().from_disk(path)

    def items(self) -> Iterator[Item]:
        number = 0
        for d, doc in enumerate(self.docbin.get_docs(self.vocab)):
            parts = list(doc.sents) if len(doc) and doc.has_annotation("SENT_START") else [doc]
            for part in parts:
                yield Item(number, d, part)
                number += 1

    def location(self, item: Item) -> str:
        return f"doc {item.source} ({self.path})"

    def span_location(self, first: Item, last: Item) -> str:
        if first.source == last.source:
            return self.location(first)
        return f"docs {first.source}-{last.source} ({self.path})"

    def key(self, item: Item) -> str:
        """The sentence's text, or the doc's (a doc without sentence boundaries)."""
        return item.payload.text

    def doc(self, item: Item, nlp: "Language") -> Tuple["Doc", str]:
        """The sentence as a doc of its own (its biLM sequence unchanged), or the whole doc."""
        from spacy.tokens import Doc

        part: Union["Doc", "Span"] = item.payload
        if isinstance(part, Doc):
            return part, part.text
        words = [token.text for token in part]
        spaces = [bool(token.whitespace_) for token in part]
        return Doc(nlp.vocab, words=words, spaces=spaces), part.text


InputItems = Union[TextLines, DocBinSentences]


def open_input(path: Path, lang: Optional[str], vocab: "Vocab") -> InputItems:
    """The reader for ``path``: a DocBin for ``.spacy``, else text lines (or JSONL texts)."""
    if path.suffix == ".spacy":
        return DocBinSentences(path, vocab)
    return TextLines(path, tokenize=lang is not None)
