"""What the ``elmo`` pipe leaves on a Doc: one object, msgpack-serialisable.

The mixed vectors travel in ``doc.tensor``; ``ElmoOutput`` keeps the layers and the mix, and its
msgpack encoding leaves the vectors out, so nothing is stored twice and a ``DocBin`` can recompute
them (docs/guide/using.md). Imports neither spaCy nor PyTorch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

import numpy as np
import srsly

#: The key marking an encoded ElmoOutput inside msgpack data.
MSGPACK_KEY = "__spacy_elmo_output__"


@dataclass
class ElmoOutput:
    """The ELMo output of one Doc, as float32 NumPy arrays on the CPU.

    width: the vectors' width (``2 * projection_dim``).
    vectors: (n_tokens, width), the mix (whitespace rows zero); None once decoded (``vectors_for``).
    layers: (n_layers + 1, n_tokens, width), or None with ``store_layers = false``.
    layer_weights: (n_layers + 1,), the normalised mix weights ``w_j``; gamma: the mix's scale."""

    width: int
    vectors: Optional[np.ndarray] = None
    layers: Optional[np.ndarray] = None
    layer_weights: Optional[np.ndarray] = None
    gamma: float = 1.0

    def __post_init__(self) -> None:
        if self.vectors is not None and (self.vectors.ndim != 2 or self.vectors.shape[1] != self.width):
            raise ValueError(f"ElmoOutput.vectors must be (n_tokens, {self.width}), got {self.vectors.shape}")
        if self.layers is not None and (self.layers.ndim != 3 or self.layers.shape[2] != self.width):
            raise ValueError(
                f"ElmoOutput.layers must be (n_layers + 1, n_tokens, {self.width}), got {self.layers.shape}"
            )
        if self.layers is not None and self.vectors is not None and self.layers.shape[1] != len(self.vectors):
            raise ValueError(
                f"ElmoOutput.layers must have {len(self.vectors)} tokens, as the vectors, got {self.layers.shape}"
            )

    @classmethod
    def empty(cls, n_tokens: int, width: int, n_layers: Optional[int] = None) -> "ElmoOutput":
        """Zeros for ``n_tokens`` tokens; ``n_layers`` (biLM layers + 1) or None for no layers."""
        layers = None if n_layers is None else np.zeros((n_layers, n_tokens, width), np.float32)
        return cls(width, np.zeros((n_tokens, width), np.float32), layers)

    def vectors_for(self, tensor: Any, n_tokens: int) -> Optional[np.ndarray]:
        """The vectors of a doc whose ``doc.tensor`` is ``tensor``: ``self.vectors``; decoded, the
        tensor if its shape fits, else the mix from the layers; None if neither."""
        if self.vectors is None:
            if getattr(tensor, "shape", None) == (n_tokens, self.width):
                self.vectors = np.asarray(tensor, dtype=np.float32)
            elif self.layers is not None and self.layer_weights is not None:
                scale = (self.layer_weights * np.float32(self.gamma)).astype(np.float32)
                self.vectors = np.tensordot(scale, self.layers, axes=(0, 0)).astype(np.float32)
        return self.vectors

    def to_dict(self) -> Dict[str, Any]:
        """Everything but the vectors, which travel in ``doc.tensor``."""
        return {
            "width": self.width,
            "layers": self.layers,
            "layer_weights": self.layer_weights,
            "gamma": self.gamma,
        }

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "ElmoOutput":
        """Also reads the older encoding (``vectors`` and ``layers`` only, no width or mix)."""

        def array(key: str) -> Optional[np.ndarray]:
            value = data.get(key)
            return None if value is None else np.asarray(value, dtype=np.float32)

        vectors, layers = array("vectors"), array("layers")
        width = data.get("width")
        if width is None:
            width = (vectors if vectors is not None else layers).shape[-1]
        return cls(int(width), vectors, layers, array("layer_weights"), float(data.get("gamma", 1.0)))


@srsly.msgpack_encoders("spacy_elmo_output")
def encode_elmo_output(obj: Any, chain=None):
    if isinstance(obj, ElmoOutput):
        return {MSGPACK_KEY: obj.to_dict()}
    return obj if chain is None else chain(obj)


@srsly.msgpack_decoders("spacy_elmo_output")
def decode_elmo_output(obj: Any, chain=None):
    if isinstance(obj, dict) and MSGPACK_KEY in obj:
        return ElmoOutput.from_dict(obj[MSGPACK_KEY])
    return obj if chain is None else chain(obj)
