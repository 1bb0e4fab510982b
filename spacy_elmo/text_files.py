"""The one way the package reads a user's text: a text file line by line, or JSON lines (one object
a line, its ``"text"`` a non-empty string). Every command and reader goes through here, so that a
bad byte or line gets the same answer everywhere: ``TextFileError``, naming the file and the line
and saying how to fix it.
"""

from __future__ import annotations

import glob
import json
import shlex
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

JSONL_SUFFIX = ".jsonl"
SPACY_SUFFIX = ".spacy"
#: The files a folder of text is read for: plain text, JSON lines and spaCy's DocBins.
TEXT_SUFFIXES = (".txt", ".text", ".tokens", ".raw", JSONL_SUFFIX, SPACY_SUFFIX)
JSONL_FORMAT = 'each line must be a JSON object with a non-empty "text" string'


class TextFileError(ValueError):
    """A line of the user's text that cannot be read: ``{path}, line {line}: {problem}``."""

    def __init__(self, path: Path, line: int, problem: str) -> None:
        super().__init__(f"{path}, line {line}: {problem}")
        self.path = Path(path)
        self.line = line


def resolve_files(spec: str | Path, suffixes: Sequence[str] = TEXT_SUFFIXES) -> List[Path]:
    """The files ``spec`` names: a file, a folder (its files with ``suffixes``, nested ones too,
    sorted) or a glob pattern. Raises FileNotFoundError when it names none."""
    path = Path(spec)
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in suffixes)
        if not files:
            raise FileNotFoundError(f"{path}: the directory holds no {', '.join(suffixes)} files")
        return files
    files = sorted(Path(p) for p in glob.glob(str(spec)) if Path(p).is_file())
    if not files:
        raise FileNotFoundError(f"{spec}: no such file or directory, nor files that match it as a pattern")
    return files


def lines(path: Path, undecodable: Optional[List[int]] = None) -> Iterator[Tuple[int, str]]:
    """``(number, line)`` for each line of ``path``, numbered from 1; ``\\n``, ``\\r\\n`` and ``\\r``
    end a line, as in Python's text files, and a byte-order mark is not part of the first. A line
    that is not UTF-8 raises TextFileError, or, given the list ``undecodable``, is left out and its
    number appended there."""
    with open(path, "rb") as handle:
        # Decoded a line at a time, so that an error knows its line.
        for number, raw in enumerate((line for block in handle for line in block.splitlines()), start=1):
            try:
                yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as err:
                if undecodable is None:
                    raise TextFileError(path, number, _not_utf8(path, err)) from None
                undecodable.append(number)


def _not_utf8(path: Path, err: UnicodeDecodeError) -> str:
    column = len(err.object[: err.start].decode("utf-8", "replace")) + 1
    converted = shlex.quote(f"{path}.utf8")
    original = shlex.quote(str(path))
    return (
        f"not UTF-8 (byte {err.object[err.start]:#04x} at column {column}); convert the file, "
        f"e.g. from Latin-1: iconv -f latin1 -t utf-8 {original} > {converted} && mv {converted} {original}"
    )


def json_lines(path: Path, undecodable: Optional[List[int]] = None) -> Iterator[Tuple[int, Dict[str, Any]]]:
    """``(number, object)`` for each line of the JSONL file ``path`` that is not blank, as ``lines``
    reads them; a line that is not a JSON object with a non-empty ``"text"`` raises TextFileError."""
    for number, line in lines(path, undecodable):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise TextFileError(path, number, f"not JSON ({err.msg}: column {err.colno}); {JSONL_FORMAT}") from None
        text = record.get("text") if isinstance(record, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise TextFileError(path, number, f"no text; {JSONL_FORMAT}, got {line.strip()[:60]!r}")
        yield number, record


def texts(path: Path, undecodable: Optional[List[int]] = None) -> Iterator[Tuple[int, str]]:
    """``(number, text)``: each line of a text file, or the ``"text"`` of each object of a
    ``.jsonl`` file (``json_lines``)."""
    if Path(path).suffix == JSONL_SUFFIX:
        return ((number, record["text"]) for number, record in json_lines(path, undecodable))
    return lines(path, undecodable)
