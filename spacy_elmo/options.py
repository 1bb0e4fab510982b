"""The biLM's shape: the ``options.json`` of the released ELMo models, parsed and validated.

The released files look like::

    {"char_cnn": {"activation": "relu", "embedding": {"dim": 16}, "filters": [[1, 32], ...],
                  "max_characters_per_token": 50, "n_characters": 262, "n_highway": 2},
     "lstm": {"cell_clip": 3, "dim": 4096, "n_layers": 2, "proj_clip": 3,
              "projection_dim": 512, "use_skip_connections": true}}

The options types are pydantic models of that layout, so one schema both checks a file and is the
shape the code reads. Training-time keys (``batch_size``, ``dropout``, ...) may sit beside them;
they are ignored here, as is anything a weight format keeps beside the shape (a native
checkpoint's ``lexicon``): which ids a model reads is its token indexer's business
(``spacy_elmo.indexers``), checked against these options when a model is built.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping, Optional, Tuple, Union

from pydantic import BaseModel, ConfigDict, Field, Strict, StrictBool, field_validator

from .chars import MAX_CHARS_PER_TOKEN, N_CHARACTERS
from .files import replacing
from .validation import StrictNonNegative, StrictPositive, validated

ACTIVATIONS = ("relu", "tanh")

#: A clip: a non-negative finite number, or 0/null for none (AllenNLP's ``if clip_value:``).
Clip = Optional[Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]]


class OptionsError(ValueError):
    """An options file or dict that does not describe a valid biLM."""


class _Section(BaseModel):
    """A section of options.json as the released files write it (fields in their key order);
    other keys are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Embedding(_Section):
    dim: StrictPositive


class CharCNNOptions(_Section):
    activation: Literal[ACTIVATIONS] = "relu"
    embedding: Embedding
    filters: Tuple[Tuple[StrictPositive, StrictPositive], ...] = Field(min_length=1)
    #: ids per token; no filter is wider.
    max_characters_per_token: StrictPositive = MAX_CHARS_PER_TOKEN
    #: character-embedding rows, the padding row included (262 for the released byte ids).
    n_characters: Annotated[int, Strict(), Field(ge=2)] = N_CHARACTERS
    n_highway: StrictNonNegative
    #: width of a word embedding concatenated before the projection (ELMoForManyLangs); 0: none.
    word_dim: StrictNonNegative = 0

    @property
    def embedding_dim(self) -> int:
        return self.embedding.dim

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)


class LSTMOptions(_Section):
    #: None: no clipping (written 0, as the released files do).
    cell_clip: Clip = None
    dim: StrictPositive
    n_layers: StrictPositive
    proj_clip: Clip = None
    projection_dim: StrictPositive
    use_skip_connections: StrictBool = True

    @field_validator("cell_clip", "proj_clip")
    @classmethod
    def _zero_is_none(cls, clip: Optional[float]) -> Optional[float]:
        return clip or None


class BiLMOptions(_Section):
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
        options = validated(cls, data, f"{source}: ", OptionsError)
        options._check(source)
        return options

    @classmethod
    def from_file(cls, path: Union[str, Path]) -> "BiLMOptions":
        return cls.from_dict(read_options_json(path), source=str(path))

    def to_dict(self) -> dict:
        """The released options.json layout (what bilm-tf and AllenNLP read); a model with a word
        embedding adds ``char_cnn.word_dim``."""
        unused = None if self.char_cnn.word_dim else {"char_cnn": {"word_dim"}}
        data = self.model_dump(mode="json", exclude=unused)
        data["lstm"].update({clip: data["lstm"][clip] or 0 for clip in ("cell_clip", "proj_clip")})
        return data

    def to_file(self, path: Union[str, Path]) -> None:
        with replacing(path) as temporary:
            temporary.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    def _check(self, source: str) -> None:
        """What no one key says: a filter fits a token's ids, the projection narrows the state."""
        cnn, lstm = self.char_cnn, self.lstm
        for i, (width, _) in enumerate(cnn.filters):
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


def read_options_json(path: Union[str, Path]) -> Any:
    """The parsed JSON of an options file, with errors that name it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"ELMo options file not found: {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise OptionsError(f"{path}: not a valid JSON options file ({err})") from err
