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
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Tuple, Union

from .chars import MAX_CHARS_PER_TOKEN, N_CHARACTERS

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


def _section(data: Mapping[str, Any], key: str, source: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, Mapping):
        raise OptionsError(f"{source}: missing section '{key}' (an object)")
    return value


def _positive_int(section: Mapping[str, Any], key: str, where: str, minimum: int = 1) -> int:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise OptionsError(f"{where}.{key} must be an integer >= {minimum}, got {value!r}")
    return value


def _clip(section: Mapping[str, Any], key: str, where: str) -> Optional[float]:
    value = section.get(key)
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    if value is None or (ok and value == 0):
        return None  # no clipping, as in AllenNLP ("if clip_value:")
    if not ok or not math.isfinite(value) or value < 0:
        raise OptionsError(f"{where}.{key} must be a positive number, 0 or null, got {value!r}")
    return float(value)


def _parse(data: Mapping[str, Any], source: str) -> BiLMOptions:
    if not isinstance(data, Mapping):
        raise OptionsError(f"{source}: expected a JSON object, got {type(data).__name__}")
    if data.get("bidirectional", True) is not True:
        # bilm-tf can train a forward-only LM; ELMo's layers need both directions.
        raise OptionsError(
            f"{source}: bidirectional must be true (ELMo concatenates a forward and a backward "
            f"LM), got {data['bidirectional']!r}"
        )
    cnn = _section(data, "char_cnn", source)
    lstm = _section(data, "lstm", source)
    where = f"{source}: char_cnn"

    embedding = cnn.get("embedding")
    if not isinstance(embedding, Mapping):
        raise OptionsError(f"{where}.embedding must be an object like {{'dim': 16}}")
    embedding_dim = _positive_int(embedding, "dim", f"{where}.embedding")

    max_width = _positive_int(
        {"max_characters_per_token": MAX_CHARS_PER_TOKEN, **cnn}, "max_characters_per_token", where
    )
    filters = cnn.get("filters")
    if not isinstance(filters, (list, tuple)) or not filters:
        raise OptionsError(f"{where}.filters must be a non-empty list of [width, n_filters]")
    # A filter cannot be wider than a token's character ids.
    parsed_filters = []
    for i, pair in enumerate(filters):
        ok = isinstance(pair, (list, tuple)) and len(pair) == 2
        ok = ok and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in pair)
        if not ok or pair[0] > max_width:
            raise OptionsError(
                f"{where}.filters[{i}] must be [width <= {max_width}, n_filters] (width at most "
                f"max_characters_per_token), got {pair!r}"
            )
        parsed_filters.append((pair[0], pair[1]))

    n_highway = _positive_int(cnn, "n_highway", where, minimum=0)
    activation = cnn.get("activation", "relu")
    if activation not in ACTIVATIONS:
        raise OptionsError(f"{where}.activation must be one of {ACTIVATIONS}, got {activation!r}")
    n_characters = _positive_int({"n_characters": N_CHARACTERS, **cnn}, "n_characters", where, minimum=2)
    word_dim = _positive_int({"word_dim": 0, **cnn}, "word_dim", where, minimum=0)

    where = f"{source}: lstm"
    skip = lstm.get("use_skip_connections", True)
    if not isinstance(skip, bool):
        raise OptionsError(f"{where}.use_skip_connections must be true or false, got {skip!r}")
    if not skip:
        warnings.warn(
            f"{source}: lstm.use_skip_connections is false: the LSTM layers are stacked without "
            "residual connections, as bilm-tf does; AllenNLP refuses such files.",
            stacklevel=3,
        )
    dim = _positive_int(lstm, "dim", where)
    projection_dim = _positive_int(lstm, "projection_dim", where)
    if projection_dim >= dim:
        # torch.nn.LSTM's projection (what the biLM runs on) must narrow the state.
        raise OptionsError(
            f"{where}.projection_dim ({projection_dim}) must be smaller than lstm.dim ({dim})"
        )
    return BiLMOptions(
        char_cnn=CharCNNOptions(
            embedding_dim=embedding_dim,
            filters=tuple(parsed_filters),
            n_highway=n_highway,
            activation=activation,
            word_dim=word_dim,
            n_characters=n_characters,
            max_characters_per_token=max_width,
        ),
        lstm=LSTMOptions(
            dim=dim,
            projection_dim=projection_dim,
            n_layers=_positive_int(lstm, "n_layers", where),
            cell_clip=_clip(lstm, "cell_clip", where),
            proj_clip=_clip(lstm, "proj_clip", where),
            use_skip_connections=skip,
        ),
    )
