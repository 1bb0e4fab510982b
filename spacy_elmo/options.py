"""The biLM's shape: the ``options.json`` of the released ELMo models, parsed and validated.

The released files look like::

    {"char_cnn": {"activation": "relu", "embedding": {"dim": 16}, "filters": [[1, 32], ...],
                  "max_characters_per_token": 50, "n_characters": 262, "n_highway": 2},
     "lstm": {"cell_clip": 3, "dim": 4096, "n_layers": 2, "proj_clip": 3,
              "projection_dim": 512, "use_skip_connections": true}}

Training-time keys (``batch_size``, ``dropout``, ...) may sit beside them; they are ignored here,
as is anything a weight format keeps beside the shape (a native checkpoint's ``lexicon``): which
ids a model reads is its token indexer's business (``spacy_elmo.indexers``), checked against
these options when a model is built.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, List, Literal, Mapping, Optional, Tuple, Union

from pydantic import BaseModel, ConfigDict, Field, Strict, StrictBool

from .chars import MAX_CHARS_PER_TOKEN, N_CHARACTERS
from .validation import StrictNonNegative, StrictPositive, validated

ACTIVATIONS = ("relu", "tanh")


class OptionsError(ValueError):
    """An options file or dict that does not describe a valid biLM."""


@dataclass(frozen=True)
class CharCNNOptions:
    embedding_dim: int
    filters: Tuple[Tuple[int, int], ...]
    n_highway: int
    activation: str = "relu"
    #: width of a word embedding concatenated before the projection (ELMoForManyLangs); 0: none.
    word_dim: int = 0
    #: character-embedding rows, the padding row included (262 for the released byte ids).
    n_characters: int = N_CHARACTERS
    #: ids per token; no filter is wider.
    max_characters_per_token: int = MAX_CHARS_PER_TOKEN

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)


@dataclass(frozen=True)
class LSTMOptions:
    dim: int
    projection_dim: int
    n_layers: int
    cell_clip: Optional[float] = 3.0
    proj_clip: Optional[float] = 3.0
    use_skip_connections: bool = True


@dataclass(frozen=True)
class BiLMOptions:
    char_cnn: CharCNNOptions
    lstm: LSTMOptions

    @property
    def output_dim(self) -> int:
        """Width of every output layer: [forward; backward] projections."""
        return 2 * self.lstm.projection_dim

    @property
    def n_output_layers(self) -> int:
        """Token layer + one per LSTM layer."""
        return self.lstm.n_layers + 1

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "options") -> "BiLMOptions":
        """Validate a parsed options.json; errors name ``source`` and the offending key."""
        return _parse(data, source)

    @classmethod
    def from_file(cls, path: Union[str, Path]) -> "BiLMOptions":
        return cls.from_dict(read_options_json(path), source=str(path))

    def to_dict(self) -> dict:
        """The released options.json layout (what bilm-tf and AllenNLP read); a model with a word
        embedding adds ``char_cnn.word_dim``."""
        cnn, lstm = self.char_cnn, self.lstm
        data = {
            "char_cnn": {
                "activation": cnn.activation,
                "embedding": {"dim": cnn.embedding_dim},
                "filters": [list(f) for f in cnn.filters],
                "max_characters_per_token": cnn.max_characters_per_token,
                "n_characters": cnn.n_characters,
                "n_highway": cnn.n_highway,
            },
            "lstm": {
                "cell_clip": lstm.cell_clip or 0,
                "dim": lstm.dim,
                "n_layers": lstm.n_layers,
                "proj_clip": lstm.proj_clip or 0,
                "projection_dim": lstm.projection_dim,
                "use_skip_connections": lstm.use_skip_connections,
            },
        }
        if cnn.word_dim:
            data["char_cnn"]["word_dim"] = cnn.word_dim
        return data

    def to_file(self, path: Union[str, Path]) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")


def read_options_json(path: Union[str, Path]) -> Any:
    """The parsed JSON of an options file, with errors that name it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"ELMo options file not found: {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise OptionsError(f"{path}: not a valid JSON options file ({err})") from err


#: A clip: a non-negative finite number, or 0/null for none (AllenNLP's ``if clip_value:``).
Clip = Optional[Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]]


class _JsonSection(BaseModel):
    """A section of options.json as the released files write it; other keys are ignored."""

    model_config = ConfigDict(extra="ignore")


class _Embedding(_JsonSection):
    dim: StrictPositive


class _CharCNNJson(_JsonSection):
    embedding: _Embedding
    filters: List[Tuple[StrictPositive, StrictPositive]] = Field(min_length=1)
    n_highway: StrictNonNegative
    activation: Literal[ACTIVATIONS] = "relu"
    max_characters_per_token: StrictPositive = MAX_CHARS_PER_TOKEN
    n_characters: Annotated[int, Strict(), Field(ge=2)] = N_CHARACTERS
    word_dim: StrictNonNegative = 0


class _LSTMJson(_JsonSection):
    dim: StrictPositive
    projection_dim: StrictPositive
    n_layers: StrictPositive
    cell_clip: Clip = None
    proj_clip: Clip = None
    use_skip_connections: StrictBool = True


class _OptionsJson(_JsonSection):
    char_cnn: _CharCNNJson
    lstm: _LSTMJson


def _parse(data: Mapping[str, Any], source: str) -> BiLMOptions:
    if not isinstance(data, Mapping):
        raise OptionsError(f"{source}: expected a JSON object, got {type(data).__name__}")
    if data.get("bidirectional", True) is not True:
        # bilm-tf can train a forward-only LM; ELMo's layers need both directions.
        raise OptionsError(
            f"{source}: bidirectional must be true (ELMo concatenates a forward and a backward "
            f"LM), got {data['bidirectional']!r}"
        )
    for section in ("char_cnn", "lstm"):
        if not isinstance(data.get(section), Mapping):
            raise OptionsError(f"{source}: missing section '{section}' (an object)")
    parsed = validated(_OptionsJson, data, f"{source}: ", OptionsError)
    cnn, lstm = parsed.char_cnn, parsed.lstm
    for i, (width, _) in enumerate(cnn.filters):  # a filter cannot be wider than a token's ids
        if width > cnn.max_characters_per_token:
            raise OptionsError(
                f"{source}: char_cnn.filters[{i}] must be [width <= {cnn.max_characters_per_token}, "
                f"n_filters] (width at most max_characters_per_token), got {list(cnn.filters[i])!r}"
            )
    if lstm.projection_dim >= lstm.dim:  # torch.nn.LSTM's projection must narrow the state
        raise OptionsError(
            f"{source}: lstm.projection_dim ({lstm.projection_dim}) must be smaller than lstm.dim ({lstm.dim})"
        )
    if not lstm.use_skip_connections:
        warnings.warn(
            f"{source}: lstm.use_skip_connections is false: the LSTM layers are stacked without "
            "residual connections, as bilm-tf does; AllenNLP refuses such files.",
            stacklevel=3,
        )
    return BiLMOptions(
        char_cnn=CharCNNOptions(
            cnn.embedding.dim, tuple(cnn.filters), cnn.n_highway, cnn.activation, cnn.word_dim,
            cnn.n_characters, cnn.max_characters_per_token,
        ),
        lstm=LSTMOptions(
            lstm.dim, lstm.projection_dim, lstm.n_layers, lstm.cell_clip or None, lstm.proj_clip or None,
            lstm.use_skip_connections,
        ),
    )
