"""The released English ELMo models by name: where AllenNLP published them and what shape they are.

The table is data (``catalog.json`` beside this file); this module only reads it. All four share
the character CNN (16-dim char embedding, 2048 filters) and two LSTM layers; they differ in the
LSTM cell/projection sizes and the number of highway layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

import srsly

from ..options import BiLMOptions

CATALOG_FILE = Path(__file__).parent / "catalog.json"


@dataclass(frozen=True)
class Release:
    """One released model: its short name here, AllenNLP's file-name stem, URLs and shape."""

    name: str
    allennlp_name: str
    options_url: str
    weights_url: str
    parameters_millions: float
    weights_mb: int
    lstm_dim: int
    projection_dim: int
    n_highway: int
    corpus: str

    def mismatch(self, options: BiLMOptions) -> Optional[str]:
        """Why ``options`` is not this release's options file, or None when it is."""
        found = (options.lstm.dim, options.lstm.projection_dim, options.char_cnn.n_highway)
        expected = (self.lstm_dim, self.projection_dim, self.n_highway)
        if found == expected:
            return None
        return (
            f"lstm.dim, lstm.projection_dim, char_cnn.n_highway are {found}, but the released "
            f"'{self.name}' model ({self.allennlp_name}) has {expected}"
        )


def options_shape(options: BiLMOptions) -> str:
    """The shape as AllenNLP's table gives it: LSTM hidden/output size and highway layers."""
    return f"LSTM {options.lstm.dim}/{options.lstm.projection_dim}, {options.char_cnn.n_highway} highway"


def releases() -> Dict[str, Release]:
    """All released models, by short name (``small``, ``medium``, ``original``, ``original-5.5b``)."""
    table = srsly.read_json(CATALOG_FILE)["models"]
    return {name: Release(name=name, **entry) for name, entry in table.items()}


def get_release(name: str) -> Optional[Release]:
    """The release called ``name`` (its short name or AllenNLP's name), or None."""
    table = releases()
    if name in table:
        return table[name]
    return next((r for r in table.values() if r.allennlp_name == name), None)
