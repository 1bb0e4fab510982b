"""Text to benchmark on: by default the WikiText-2 slice shipped with the package.

Without ``--text`` the bench reads ``DEFAULT_TEXT``, package data, so that it measures the same
text wherever the package runs (a source checkout or an installed wheel): the first 238 lines
(79 KB, about 15,000 tokens, whole lines) of WikiText-2's validation set (Merity et al. 2016,
"Pointer Sentinel Mixture Models"; English Wikipedia text, tokenized, rare words as ``<unk>``),
licensed CC BY-SA 3.0 like Wikipedia: see ``DEFAULT_TEXT_NOTICE`` beside it. A bench that needs
more tokens cycles through it; give other text with ``--text`` for figures on your own.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
#: The benchmarks' default text (see the module docstring), and its attribution and licence.
DEFAULT_TEXT = DATA_DIR / "wikitext2_valid_head.txt"
DEFAULT_TEXT_NOTICE = DATA_DIR / "wikitext2_valid_head.NOTICE.txt"
#: Other text, for warm-ups that must not touch the timed text.
DEMO_TEXT = DATA_DIR / "demo_sentences.txt"


def default_text_path() -> Path:
    """The text a bench reads without ``--text``: ``DEFAULT_TEXT``, shipped with the package."""
    return DEFAULT_TEXT


def text_lines(path: Optional[Path] = None) -> List[str]:
    """Non-empty lines of already tokenized text, WikiText headings (`` = Title = ``) left out."""
    path = Path(path) if path is not None else default_text_path()
    if not path.is_file():
        raise FileNotFoundError(f"benchmark text not found: {path}")
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not (line.startswith("= ") and line.endswith(" =")):
            lines.append(line)
    if not lines:
        raise ValueError(f"{path}: no text lines to benchmark on")
    return lines
