"""The one way every command gets matplotlib (the ``plot`` extra): headless, or an error naming the
install command instead of a raw ``ModuleNotFoundError``.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any, Union

PLOT_EXTRA = "pip install 'spacy-elmo[plot]'"


def pyplot(what: str) -> ModuleType:
    """``matplotlib.pyplot`` on the file-only Agg backend; ImportError naming ``what`` (the
    option or command that draws) and the install command when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError as err:
        raise ImportError(f"{what} needs matplotlib, the 'plot' extra: {PLOT_EXTRA}") from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Union[str, Path], dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` (its folder created) and close it: a command draws many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot("save_figure").close(fig)
    return path
