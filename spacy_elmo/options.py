"""The biLM's shape: the ``options.json`` of the released ELMo models, parsed and validated.

The released files look like::

    {"char_cnn": {"activation": "relu", "embedding": {"dim": 16}, "filters": [[1, 32], ...],
                  "max_characters_per_token": 50, "n_characters": 262, "n_highway": 2},
     "lstm": {"cell_clip": 3, "dim": 4096, "n_layers": 2, "proj_clip": 3,
              "projection_dim": 512, "use_skip_connections": true}}

Training-time keys (``batch_size``, ``dropout``, ...) may sit beside them; they are ignored here.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Tuple, Union

from .chars import MAX_CHARS_PER_TOKEN, N_CHARACTERS

if TYPE_CHECKING:
    from .manylangs.lexicon import ManyLangsVocab

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
    #: an ELMoForManyLangs model's lexicons (its token ids); None: the released UTF-8 byte ids.
    lexicon: Optional["ManyLangsVocab"] = None

    @property
    def token_indexer(self):
        """What turns this model's tokens into ids (``spacy_elmo.indexers``)."""
        from .indexers import ByteIndexer
        from .manylangs.lexicon import LexiconIndexer

        return ByteIndexer() if self.lexicon is None else LexiconIndexer(self.lexicon)

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
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"ELMo options file not found: {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise OptionsError(f"{path}: not a valid JSON options file ({err})") from err
        return cls.from_dict(data, source=str(path))

    def to_dict(self) -> dict:
        """The released options.json layout (what bilm-tf and AllenNLP read); an ELMoForManyLangs
        model adds ``char_cnn.word_dim`` and a ``lexicon`` section."""
        cnn, lstm = self.char_cnn, self.lstm
        lexicon = self.lexicon
        data = {
            "char_cnn": {
                "activation": cnn.activation,
                "embedding": {"dim": cnn.embedding_dim},
                "filters": [list(f) for f in cnn.filters],
                "max_characters_per_token": lexicon.max_characters_per_token if lexicon else MAX_CHARS_PER_TOKEN,
                "n_characters": lexicon.chars.size + 1 if lexicon else N_CHARACTERS,
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
        if lexicon is not None:
            data["lexicon"] = lexicon.to_dict()
        return data

    def to_file(self, path: Union[str, Path]) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")


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

    lexicon = None
    if data.get("lexicon") is not None:
        lexicon = _parse_lexicon(data["lexicon"], cnn, source)
    elif "word_dim" in cnn:
        raise OptionsError(f"{where}.word_dim needs a 'lexicon' section (the word ids)")

    filters = cnn.get("filters")
    if not isinstance(filters, (list, tuple)) or not filters:
        raise OptionsError(f"{where}.filters must be a non-empty list of [width, n_filters]")
    # A filter cannot be wider than a token's character ids.
    max_width = lexicon.max_characters_per_token if lexicon else MAX_CHARS_PER_TOKEN
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
    n_characters = cnn.get("n_characters", N_CHARACTERS)
    if lexicon is not None:
        pass  # checked against the lexicon by _parse_lexicon
    elif n_characters not in (N_CHARACTERS - 1, N_CHARACTERS):
        raise OptionsError(
            f"{where}.n_characters must be 261 (training) or 262 (inference), got {n_characters!r}"
        )
    max_chars = cnn.get("max_characters_per_token", MAX_CHARS_PER_TOKEN)
    if lexicon is None and max_chars != MAX_CHARS_PER_TOKEN:
        raise OptionsError(
            f"{where}.max_characters_per_token must be {MAX_CHARS_PER_TOKEN} "
            f"(the released character mapping), got {max_chars!r}"
        )

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
            word_dim=0 if lexicon is None or lexicon.words is None else cnn["word_dim"],
        ),
        lstm=LSTMOptions(
            dim=dim,
            projection_dim=projection_dim,
            n_layers=_positive_int(lstm, "n_layers", where),
            cell_clip=_clip(lstm, "cell_clip", where),
            proj_clip=_clip(lstm, "proj_clip", where),
            use_skip_connections=skip,
        ),
        lexicon=lexicon,
    )


def _parse_lexicon(data: Any, cnn: Mapping[str, Any], source: str) -> "ManyLangsVocab":
    """An ELMoForManyLangs lexicon section, consistent with char_cnn's sizes."""
    from .manylangs.lexicon import LexiconError, ManyLangsVocab

    try:
        vocab = ManyLangsVocab.from_dict(data, source)
    except LexiconError as err:
        raise OptionsError(str(err)) from err
    where = f"{source}: char_cnn"
    expected = {
        "n_characters": vocab.chars.size + 1,
        "max_characters_per_token": vocab.max_characters_per_token,
    }
    for key, value in expected.items():
        if cnn.get(key) != value:
            raise OptionsError(f"{where}.{key} must be {value} (from the lexicon), got {cnn.get(key)!r}")
    if vocab.words is not None:
        _positive_int(cnn, "word_dim", where)
    elif cnn.get("word_dim", 0):
        raise OptionsError(f"{where}.word_dim is {cnn['word_dim']!r} but the lexicon has no words")
    return vocab
