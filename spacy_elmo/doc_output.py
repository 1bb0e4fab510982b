"""What the ``elmo`` pipe leaves on a Doc: one object, msgpack-serialisable.

The pipe stores an :class:`ElmoOutput` in ``doc._.elmo_output``; ``doc._.elmo``,
``doc._.elmo_layers``, ``token._.elmo`` and ``span._.elmo`` are getters over it. Keeping the
arrays in ``doc.user_data`` (through the extension) and registering srsly msgpack encoders for
the class is what lets ``doc.to_bytes()``, ``DocBin(store_user_data=True)`` and
``nlp.pipe(n_process=2)`` (which ships docs between processes with ``to_bytes``) keep them.

This module itself imports neither spaCy nor PyTorch.
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
    """The ELMo vectors of one Doc, as float32 NumPy arrays on the CPU.

    vectors: (n_tokens, width), the scalar mix ``gamma * sum_j w_j h_j`` of the biLM layers;
        rows of tokens the biLM did not read (whitespace tokens) are zero.
    layers: (n_layers + 1, n_tokens, width), every biLM layer (layer 0 is the context-independent
        token layer ``[x; x]``), or None when the pipe was configured with ``store_layers = false``.
    """

    vectors: np.ndarray
    layers: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2:
            raise ValueError(f"ElmoOutput.vectors must be (n_tokens, width), got {self.vectors.shape}")
        if self.layers is not None and (
            self.layers.ndim != 3 or self.layers.shape[1:] != self.vectors.shape
        ):
            raise ValueError(
                f"ElmoOutput.layers must be (n_layers + 1, {self.vectors.shape[0]}, "
                f"{self.vectors.shape[1]}), got {self.layers.shape}"
            )

    @classmethod
    def empty(cls, n_tokens: int, width: int, n_layers: Optional[int] = None) -> "ElmoOutput":
        """Zeros for ``n_tokens`` tokens; ``n_layers`` (biLM layers + 1) or None for no layers."""
        layers = None if n_layers is None else np.zeros((n_layers, n_tokens, width), np.float32)
        return cls(np.zeros((n_tokens, width), np.float32), layers)

    def to_dict(self) -> Dict[str, Any]:
        return {"vectors": self.vectors, "layers": self.layers}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "ElmoOutput":
        layers = data.get("layers")
        return cls(
            np.asarray(data["vectors"], dtype=np.float32),
            None if layers is None else np.asarray(layers, dtype=np.float32),
        )


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
