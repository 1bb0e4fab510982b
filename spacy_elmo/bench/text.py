"""Text to benchmark on: by default ``DEFAULT_TEXT``, package data, so the bench measures the same
text wherever it runs: the first 238 lines of WikiText-2's validation set (Merity et al. 2016),
licensed CC BY-SA 3.0 like Wikipedia (``DEFAULT_TEXT_NOTICE``). A bench that needs more tokens
cycles through it; ``--text`` gives your own.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from ..text_files import lines as read_lines

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
#: The benchmarks' default text (see the module docstring), and its attribution and licence.
DEFAULT_TEXT = DATA_DIR / "wikitext2_valid_head.txt"
DEFAULT_TEXT_NOTICE = DATA_DIR / "wikitext2_valid_head.NOTICE.txt"


def text_lines(path: Optional[Path] = None) -> List[str]:
    """Non-empty lines of already tokenized text, WikiText headings (`` = Title = ``) left out."""
    path = Path(path) if path is not None else DEFAULT_TEXT
    if not path.is_file():
        raise FileNotFoundError(f"benchmark text not found: {path}")
    lines = []
    for _, line in read_lines(path):
        line = line.strip()
        if line and not (line.startswith("= ") and line.endswith(" =")):
            lines.append(line)
    if not lines:
        raise ValueError(f"{path}: no text lines to benchmark on")
    return lines
