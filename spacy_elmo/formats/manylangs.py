"""HIT-SCIR's ELMoForManyLangs model directories as a weight format (docs/guide/many-languages.md):
``config.json`` (naming an architecture config, looked for beside it; the released names use
``RELEASED_CONFIGS``), ``char.dic``/``word.dic`` lexicons, and ``token_embedder.pkl``/
``encoder.pkl`` state dicts. Only the released architecture ("cnn" embedder, "elmo" encoder).

Weight mapping (ELMoForManyLangs -> here):

- ``char_emb_layer``/``word_emb_layer`` (n, e) -> rows 1.. of ``char_embedding``/``word_embedding``
  (row 0: the padded position); ``convolutions``, ``projection`` as they are.
- ``highways._layers.k`` computes ``gate * x + (1 - gate) * relu(transform)``; here the gate
  multiplies the transform, so the gate half of weight and bias is negated (``sigmoid(-z) = 1 -
  sigmoid(z)``).
- ``{forward,backward}_layer_l``: ``input_linearity`` -> ``weight_ih``, ``state_linearity`` ->
  ``weight_hh``/``bias_hh`` (``bias_ih`` zero), ``state_projection`` -> ``weight_hr``; gate order
  (i, f, g, o) both.

Lexicon lines are ``entry<TAB>id``; an entry that is whitespace is lost to ``strip()`` when
ELMoForManyLangs reads it and becomes U+3000, and ``read_lexicon`` does the same, so ids match.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Annotated, Any, Dict, Mapping, Optional, Sequence, Tuple

import torch
from pydantic import BaseModel, BeforeValidator, ConfigDict

from ..indexers.lexicon import (
    REQUIRED_CHARS,
    REQUIRED_WORDS,
    Lexicon,
    LexiconError,
    LexiconIndexer,
    ManyLangsVocab,
    TokenWidth,
)
from ..nn.bilm import BiLM
from ..options import BiLMOptions, OptionsError
from ..validation import StrictNonNegative, StrictPositive, validated
from .base import OPTIONS_NAME, LoadedWeights, PathLike, WeightFileError, WeightFormat, WeightSource

NAME = "elmoformanylangs"
#: what a whitespace entry becomes when ELMoForManyLangs reads a lexicon (see the module doc).
WHITESPACE_ENTRY = "\u3000"
CONFIG_NAME = "config.json"
CHAR_LEXICON = "char.dic"
WORD_LEXICON = "word.dic"
TOKEN_EMBEDDER = "token_embedder.pkl"
ENCODER = "encoder.pkl"

_RELEASED = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096, "n_layers": 2},
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "n_highway": 2,
        "word_dim": 100,
        "char_dim": 50,
        "max_characters_per_token": 50,
    },
}
#: The architecture configs the released models name but do not ship (both have these values).
RELEASED_CONFIGS = {
    "cnn_50_100_512_4096_sample.json": _RELEASED,
    "cnn_0_100_512_4096_sample.json": _RELEASED,
}


class ManyLangsFormatError(ValueError):
    """A directory that is not a complete, consistent ELMoForManyLangs model."""


def _released(name: str) -> BeforeValidator:
    """A section's ``name``, in any case: only the released models' architecture is supported."""

    def check(value: Any) -> str:
        if str(value).lower() != name:
            raise ValueError(f"must be {name!r} (the released models' architecture, the only one supported)")
        return name

    return BeforeValidator(check)


class TokenEmbedder(BaseModel):
    """The architecture config's ``token_embedder``; its shape keys are checked as ``BiLMOptions``."""

    name: Annotated[str, _released("cnn")]
    #: a character CNN is what this reader supports (a model with words only has none).
    char_dim: StrictPositive
    #: 0: no word lexicon.
    word_dim: StrictNonNegative = 0
    max_characters_per_token: TokenWidth = 50
    activation: Any = "relu"
    filters: Any = None
    n_highway: Any = None


class Encoder(BaseModel):
    """The architecture config's ``encoder``: its other keys are checked as ``BiLMOptions``' ``lstm``."""

    model_config = ConfigDict(extra="allow")
    name: Annotated[str, _released("elmo")]


class Architecture(BaseModel):
    """An ELMoForManyLangs architecture config (the file ``config.json`` names); other keys (its
    training settings) are ignored."""

    token_embedder: TokenEmbedder
    encoder: Encoder


def is_manylangs_dir(path: PathLike) -> bool:
    """True for a directory holding any file of an ELMoForManyLangs model and no ``options.json``
    (which the other formats have), so a partial one gets errors naming what is missing."""
    path = Path(path)
    names = (CONFIG_NAME, CHAR_LEXICON, TOKEN_EMBEDDER, ENCODER)
    if not path.is_dir() or (path / OPTIONS_NAME).is_file():
        return False
    return any((path / name).is_file() for name in names)


def _read_directory(path: Path) -> LoadedWeights:
    config = read_architecture(path)
    vocab = read_vocab(path, config.token_embedder)
    indexer = LexiconIndexer(vocab)
    options = _options(config, vocab, source=str(path / CONFIG_NAME))
    state = _convert_state(
        _torch_state(path / TOKEN_EMBEDDER), _torch_state(path / ENCODER), options, indexer, path
    )
    return LoadedWeights(options, state, indexer)


def _locate(directory: Path) -> Optional[WeightSource]:
    if not is_manylangs_dir(directory):
        return None
    # Its reader names each missing or malformed file itself.
    return WeightSource(directory / CONFIG_NAME, directory / ENCODER, NAME)


def _read(source: WeightSource) -> LoadedWeights:
    return _read_directory(source.directory)


def read_architecture(path: Path) -> Architecture:
    """The model's architecture config (the file ``config.json`` names by ``config_path``)."""
    if not path.is_dir():
        raise FileNotFoundError(f"ELMoForManyLangs model directory not found: {path}")
    config_file = path / CONFIG_NAME
    outer = _read_json(config_file)
    config_path = outer.get("config_path") if isinstance(outer, Mapping) else None
    if not isinstance(config_path, str) or not config_path:
        raise ManyLangsFormatError(f"{config_file}: missing 'config_path' (the architecture config)")
    for candidate in (path / config_path, path / Path(config_path).name):
        if candidate.is_file():
            return validated(Architecture, _read_json(candidate), f"{candidate}: ", ManyLangsFormatError)
    released = RELEASED_CONFIGS.get(Path(config_path).name)
    if released is not None:
        return Architecture.model_validate(released)
    raise FileNotFoundError(
        f"{config_file}: its architecture config {config_path!r} is not in {path}; put that file "
        f"(from the model's training run) beside {CONFIG_NAME}"
    )


def read_vocab(path: Path, embedder: TokenEmbedder) -> ManyLangsVocab:
    """The char lexicon (and the word lexicon if word_dim > 0)."""
    chars = read_lexicon(_required(path / CHAR_LEXICON), REQUIRED_CHARS)
    words = read_lexicon(_required(path / WORD_LEXICON), REQUIRED_WORDS) if embedder.word_dim else None
    return ManyLangsVocab(
        format=NAME, max_characters_per_token=embedder.max_characters_per_token, chars=chars, words=words
    )


def _options(config: Architecture, vocab: ManyLangsVocab, source: str) -> BiLMOptions:
    embedder = config.token_embedder
    data = {
        "char_cnn": {
            "activation": embedder.activation,
            "embedding": {"dim": embedder.char_dim},
            "filters": embedder.filters,
            "n_highway": embedder.n_highway,
            "n_characters": vocab.chars.size + 1,
            "max_characters_per_token": vocab.max_characters_per_token,
        },
        "lstm": {**config.encoder.model_extra, "use_skip_connections": True},
    }
    if vocab.words is not None:
        data["char_cnn"]["word_dim"] = embedder.word_dim
    try:
        options = BiLMOptions.from_dict(data, source=source)
        LexiconIndexer(vocab).check_options(options, source)
    except OptionsError as err:
        raise ManyLangsFormatError(str(err)) from err
    return options


def _convert_state(
    embedder: Dict[str, torch.Tensor],
    encoder: Dict[str, torch.Tensor],
    options: BiLMOptions,
    indexer: LexiconIndexer,
    path: Path,
) -> Dict[str, torch.Tensor]:
    """Their two state dicts -> this package's ``BiLM`` state dict, each tensor checked against the
    shape the architecture config implies, so a mismatch names their file and parameter."""
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in BiLM(options, indexer=indexer).state_dict().items()}
    config_file = path / CONFIG_NAME
    take = _Taker(embedder, path / TOKEN_EMBEDDER, config_file)
    state: Dict[str, torch.Tensor] = {}
    enc = "token_encoder."

    def copy(ours: str, theirs: str) -> None:
        state[enc + ours] = take(theirs, shapes[enc + ours])

    def embedding(ours: str, theirs: str) -> None:
        rows, width = shapes[enc + ours]
        state[enc + ours] = _with_padding_row(take(theirs, (rows - 1, width)))

    embedding("char_embedding.weight", "char_emb_layer.embedding.weight")
    if options.char_cnn.word_dim:
        embedding("word_embedding.weight", "word_emb_layer.embedding.weight")
    for i in range(len(options.char_cnn.filters)):
        for kind in ("weight", "bias"):
            copy(f"convolutions.{i}.{kind}", f"convolutions.{i}.{kind}")
    dim = options.char_cnn.n_filters
    sign = torch.ones(2 * dim, 1)
    sign[dim:] = -1.0
    for k in range(options.char_cnn.n_highway):
        copy(f"highways.{k}.linear.weight", f"highways._layers.{k}.weight")
        copy(f"highways.{k}.linear.bias", f"highways._layers.{k}.bias")
        state[f"{enc}highways.{k}.linear.weight"] *= sign
        state[f"{enc}highways.{k}.linear.bias"] *= sign[:, 0]
    for kind in ("weight", "bias"):
        copy(f"projection.{kind}", f"projection.{kind}")
    take.check_all_used()

    take = _Taker(encoder, path / ENCODER, config_file)
    for direction in ("forward", "backward"):
        for layer in range(options.lstm.n_layers):
            theirs = f"{direction}_layer_{layer}."
            ours = f"{direction}_lstm.layers.{layer}."
            for our_name, their_name in (
                ("weight_ih_l0", "input_linearity.weight"),
                ("weight_hh_l0", "state_linearity.weight"),
                ("bias_hh_l0", "state_linearity.bias"),
                ("weight_hr_l0", "state_projection.weight"),
            ):
                state[ours + our_name] = take(theirs + their_name, shapes[ours + our_name])
            state[ours + "bias_ih_l0"] = torch.zeros_like(state[ours + "bias_hh_l0"])
    take.check_all_used()
    return state


class _Taker:
    """Reads tensors out of one state dict, naming the file in every error."""

    def __init__(self, state: Dict[str, torch.Tensor], source: Path, config_file: Path) -> None:
        self.state, self.source, self.config_file, self.used = state, source, config_file, set()

    def __call__(self, name: str, shape: Tuple[int, ...]) -> torch.Tensor:
        if name not in self.state:
            raise WeightFileError(
                f"{self.source}: no parameter '{name}' (has {sorted(self.state)[:6]}...); "
                "does the architecture config match the weights?"
            )
        tensor = self.state[name]
        if tuple(tensor.shape) != tuple(shape):
            raise WeightFileError(
                f"{self.source}: parameter '{name}' has shape {tuple(tensor.shape)}, but the "
                f"architecture config ({self.config_file} and the file it names) needs {tuple(shape)}"
            )
        self.used.add(name)
        return tensor.float()

    def check_all_used(self) -> None:
        unused = sorted(set(self.state) - self.used)
        if unused:
            raise WeightFileError(
                f"{self.source}: parameters the architecture config does not account for: {unused[:6]}"
            )


def _with_padding_row(weight: torch.Tensor) -> torch.Tensor:
    """Ids are shifted by +1 here: a zero row 0 for padded positions, then their rows."""
    return torch.cat([weight.new_zeros(1, weight.shape[1]), weight])


def _torch_state(path: Path) -> Dict[str, torch.Tensor]:
    _required(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # pickle / zip errors come in many types
        raise WeightFileError(
            f"{path}: not a PyTorch state dict ({err}); it holds {path.stat().st_size:,} bytes: cut "
            "short or damaged?"
        ) from err
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightFileError(f"{path}: expected a state dict (parameter name -> tensor)")
    return dict(state)


def _required(path: Path) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"ELMoForManyLangs model file missing: {path}")
    return path


def _read_json(path: Path) -> Any:
    try:
        return json.loads(_required(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ManyLangsFormatError(f"{path}: not valid JSON ({err})") from err


def read_lexicon(path: Path, required: Sequence[str]) -> Lexicon:
    """Read a ``char.dic`` / ``word.dic``; the embedding has one row per line."""
    ids: Dict[str, int] = {}
    n_lines = 0
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            fields = line.strip().split("\t")
            if fields == [""]:
                raise LexiconError(f"{path}:{line_no}: empty line; expected 'entry<TAB>id'")
            if len(fields) == 1:
                fields.insert(0, WHITESPACE_ENTRY)
            if len(fields) != 2 or not fields[1].lstrip("-").isdigit():
                raise LexiconError(f"{path}:{line_no}: expected 'entry<TAB>id', got {line!r}")
            ids[fields[0]] = int(fields[1])
            n_lines += 1
    return validated(Lexicon, {"ids": ids, "size": n_lines}, f"{path}: ", LexiconError).check(str(path), required)


def _check(source: WeightSource) -> None:
    """The two weight files' zip directories, read without a tensor (a cut file has none); an older
    pickle is checked where ``_read`` loads it."""
    for path in (source.directory / TOKEN_EMBEDDER, source.directory / ENCODER):
        if not path.is_file():
            continue  # ``_read`` names a missing file
        with path.open("rb") as handle:
            if handle.read(4) != b"PK\x03\x04":
                continue
        try:
            with zipfile.ZipFile(path) as archive:
                archive.infolist()
        except (zipfile.BadZipFile, OSError):
            raise WeightFileError(
                f"{path}: a PyTorch weight file cut short or damaged: it holds "
                f"{path.stat().st_size:,} bytes, without the zip directory that torch.save writes last"
            ) from None


FORMAT = WeightFormat(NAME, _locate, lambda weight_file: False, _read, _check)
