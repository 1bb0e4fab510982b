"""The pretraining config: a spaCy-style (confection) file, validated into typed settings."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Annotated, Any, Dict, List, Literal, Optional, Union

from confection import Config, ConfigValidationError
from pydantic import BeforeValidator, Field, PrivateAttr, ValidationError, field_validator, model_validator

from ..nn.precision import TRAINING_PRECISIONS
from ..nn.threads import command_threads
from ..options import ACTIVATIONS, BiLMOptions
from ..validation import Fraction, NonNegativeNumber, StrictNonNegative, StrictPositive, Threads, at_least, problems
from .corpus import CorpusSettings
from .optimizers import OptimizerSettings
from .section import Section

#: The package's config files: the documented default (``pretrain.cfg``, written by ``init-config``)
#: and the recipes of ``init-config --recipe`` (``recipes/NAME.cfg``: keys that replace its own).
CONFIGS = Path(__file__).resolve().parent.parent / "configs"
DEFAULT_CONFIG = (CONFIGS / "pretrain.cfg").read_text(encoding="utf-8")

#: ``[training] step`` values (``static_step.resolve_step_kind``).
STEP_KINDS = ("auto", "eager", "cuda_graph", "compile", "compile_graph")


class ConfigError(ValueError):
    """A pretraining config value that cannot be used, naming its key."""


def _auto_or_bool(value: Any) -> Union[str, bool]:
    # Literal["auto", True, False] would also take 1 and 0 (1 == True).
    if value != "auto" and not isinstance(value, bool):
        raise ValueError('must be "auto", true or false')
    return value


AutoOrBool = Annotated[Union[str, bool], BeforeValidator(_auto_or_bool)]


class SystemSettings(Section):
    seed: int
    #: CPU threads of torch's intra-op pool (torch.set_num_threads), at least 1, or "auto"
    #: (``thread_count``). Results are bitwise reproducible only at the same
    #: thread count.
    threads: Threads = 1

    @property
    def thread_count(self) -> int:
        """``threads`` with "auto" resolved; the trainer sets torch's thread count to it."""
        return command_threads(self.threads)


class ModelSettings(Section):
    """The biLM's shape; ``to_options`` adds the deeper checks of an options.json."""

    char_embedding_dim: StrictPositive
    filters: Annotated[List[List[StrictPositive]], Field(min_length=1)]
    n_highway: StrictNonNegative
    activation: Literal[ACTIVATIONS]
    lstm_dim: StrictPositive
    projection_dim: StrictPositive
    n_layers: StrictPositive
    cell_clip: Optional[NonNegativeNumber]
    proj_clip: Optional[NonNegativeNumber]
    use_skip_connections: bool = True

    def to_options(self) -> BiLMOptions:
        data: Dict[str, Any] = {}
        for key, path in MODEL_KEYS.items():
            *sections, name = path.split(".")
            place = data
            for section in sections:
                place = place.setdefault(section, {})
            place[name] = getattr(self, key)
        return BiLMOptions.from_dict(data, source="config [model]")


#: Each ``[model]`` key and where options.json keeps it.
MODEL_KEYS = {
    "char_embedding_dim": "char_cnn.embedding.dim",
    "filters": "char_cnn.filters",
    "n_highway": "char_cnn.n_highway",
    "activation": "char_cnn.activation",
    "lstm_dim": "lstm.dim",
    "projection_dim": "lstm.projection_dim",
    "n_layers": "lstm.n_layers",
    "cell_clip": "lstm.cell_clip",
    "proj_clip": "lstm.proj_clip",
    "use_skip_connections": "lstm.use_skip_connections",
}


class CorpusSection(CorpusSettings):
    """``[corpus]``: how text is read (``CorpusSettings``) plus where it is and how it is fed."""

    train: Optional[str]
    dev: Optional[str]
    shuffle_buffer: StrictPositive
    dev_max_tokens: Optional[StrictPositive]
    # Runs written before these keys existed batched sentences.
    batching: Literal["sentences", "windows"] = "sentences"
    window_length: at_least(2) = 20

    @field_validator("train")
    @classmethod
    def _train_is_given(cls, value: Optional[str]) -> str:
        if value is None:
            raise ValueError("must name the training text (or set paths.train)")
        return value

    @field_validator("lang")
    @classmethod
    def _lang_is_spacys(cls, value: str) -> str:
        """Checked now, not when the first raw line meets spaCy's tokenizer (or a .spacy file)."""
        from spacy.util import get_lang_class

        try:
            get_lang_class(value)
        except ImportError:
            raise ValueError("must be a language spaCy has (e.g. 'en', 'de', 'zh', 'xx')") from None
        return value


class VocabSettings(Section):
    path: Optional[str]
    size: at_least(4)
    min_count: StrictPositive


class ObjectiveSettings(Section):
    softmax: Literal["auto", "full", "sampled"]
    n_negative_samples: StrictPositive
    dropout: Fraction
    # Runs written before these keys existed resume with their defaults.
    sparse_updates: AutoOrBool = "auto"
    tie_unseen_rows: bool = False


class InitializeSettings(Section):
    # Configs written before [initialize] existed start from random weights.
    bilm: Optional[str] = None
    weight_file: Optional[str] = None
    # Runs written before this key existed train everything from the first step.
    softmax_only_steps: StrictNonNegative = 0


class TrainingSettings(Section):
    batch_tokens: StrictPositive
    max_steps: StrictPositive
    precision: Literal[TRAINING_PRECISIONS]
    eval_every: StrictPositive
    checkpoint_every: StrictPositive
    log_every: StrictPositive
    # Runs written before these keys existed ran eagerly.
    step: Literal[STEP_KINDS] = "auto"
    distinct_tokens: Optional[StrictPositive] = None
    # "auto": on for CUDA's eager and recorded steps (``build.lstm_step_settings``); runs written
    # before these keys existed resume with "auto".
    fused_cell: AutoOrBool = "auto"
    directions_on_streams: AutoOrBool = "auto"
    lstm_wavefront: AutoOrBool = "auto"
    # Runs written before this key existed ran to max_steps.
    patience: Optional[StrictPositive] = None


class PretrainSettings(Section):
    """Everything the trainer needs: the config file's sections, validated."""

    paths: Dict[str, Any] = {}
    system: SystemSettings
    model: ModelSettings
    corpus: CorpusSection
    vocab: VocabSettings
    objective: ObjectiveSettings
    optimizer: OptimizerSettings
    initialize: InitializeSettings = InitializeSettings()
    training: TrainingSettings
    _options: Optional[BiLMOptions] = PrivateAttr(None)
    _config: Optional[Config] = PrivateAttr(None)

    @model_validator(mode="after")
    def _keys_agree(self) -> "PretrainSettings":
        """What no one key says: [model] is a valid biLM, [training] step and batch_tokens suit
        the batches (checked when the config is read, not after the corpus has been counted)."""
        self._options = self.model.to_options()
        windows = self.corpus.batching == "windows"
        check_step(self.training.step, windows, self.training.precision)
        if windows and self.training.batch_tokens < self.corpus.window_length:
            raise ValueError(
                f"training.batch_tokens ({self.training.batch_tokens}) must hold at least one window "
                f"of corpus.window_length ({self.corpus.window_length}) tokens"
            )
        return self

    @property
    def options(self) -> BiLMOptions:
        """The biLM's shape, from [model]."""
        return self._options

    @property
    def config(self) -> Optional[Config]:
        """The config these settings were parsed from."""
        return self._config

    def written_config(self) -> Config:
        """What a run writes as its config.cfg: the config as given, its ``${...}`` references
        kept (a resume's ``--paths.dev`` then reaches ``corpus.dev``), with the thread count it
        runs with (a config written before ``[system] threads`` existed gets the default)."""
        config = copy.deepcopy(self._config)
        config.setdefault("system", {})["threads"] = self.system.threads
        return config


def load_config(
    path: Optional[Union[str, Path]] = None, overrides: Optional[Dict[str, Any]] = None
) -> Config:
    """Read a config file (or the default) with ``{"section.key": value}`` overrides, as
    ``spacy train`` reads its config: its ``${...}`` references are kept (``parse_settings``
    resolves them), so an override of ``paths.train`` reaches ``corpus.train`` and a run's
    config.cfg keeps them."""
    if path is None:
        return config_with_overrides(DEFAULT_CONFIG, overrides or {}, "the default config")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"pretraining config not found: {path}")
    return config_with_overrides(path.read_text(encoding="utf-8"), overrides or {}, str(path))


def config_with_overrides(text: str, overrides: Dict[str, Any], source: str) -> Config:
    """``text`` parsed by confection with ``overrides`` set, references not yet resolved; an
    override of a section ``text`` lacks is refused, naming the key and ``source``'s sections."""
    try:
        return Config().from_str(text, interpolate=False, overrides=overrides)
    except ConfigValidationError as err:
        wrong = [key for key in overrides if key.split(".") in [error["loc"] for error in err.errors or ()]]
        if not wrong:
            raise
        sections = ", ".join(Config().from_str(text, interpolate=False))
        raise ConfigError(
            f"override {wrong[0]!r} does not name a key of a section of {source} (its sections: {sections})"
        ) from None


def parse_settings(config: Config) -> PretrainSettings:
    """Validate a config (``load_config``), its ``${...}`` references resolved; a ``ConfigError``
    names every wrong key as ``section.key must be ..., got value``."""
    resolved = config if config.is_interpolated else config.interpolate()
    try:
        settings = PretrainSettings.model_validate(dict(resolved))
    except ValidationError as err:
        raise ConfigError(problems(err, PretrainSettings)) from None
    settings._config = config
    return settings


def check_step(kind: str, windows: bool, precision: str) -> None:
    """What ``[training] step`` needs of the other keys, checked when the config is read (not
    after the corpus has been counted); ``static_step.resolve_step_kind`` adds the device."""
    if kind in ("auto", "eager"):
        return
    if not windows:
        raise ConfigError(
            f'[training] step = "{kind}" needs batches of fixed shape: set [corpus] batching = '
            '"windows" (or step = "eager")'
        )
    if precision == "fp16":
        raise ConfigError(
            f'[training] step = "{kind}" does not run with precision "fp16" (its loss scaler '
            'reads the device every step): use "bf16", or step = "eager"'
        )


def model_overrides(options: BiLMOptions) -> Dict[str, Any]:
    """``{"model.key": value}``: the [model] section that describes ``options``."""
    flat = flatten(options.model_dump(mode="json"))
    return {f"model.{key}": flat[path] for key, path in MODEL_KEYS.items()}


def flatten(data: Dict, prefix: str = "") -> Dict[str, object]:
    """{"lstm": {"dim": 4}} -> {"lstm.dim": 4}."""
    flat: Dict[str, object] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _recipe(name: str) -> Dict[str, Any]:
    """``{"section.key": value}`` of ``configs/recipes/NAME.cfg``."""
    config = Config().from_disk(CONFIGS / "recipes" / f"{name}.cfg", interpolate=False)
    return {f"{section}.{key}": value for section, keys in config.items() for key, value in keys.items()}


#: Named starting points of ``init-config --recipe``: "default", a small model that trains on a
#: CPU, on sentences (the default config as it is); the others are files of ``configs/recipes``.
RECIPES: Dict[str, Dict[str, Any]] = {"default": {}, "bilm-tf": _recipe("bilm-tf"), "fast": _recipe("fast")}


def config_text(recipe: str = "default", values: Optional[Dict[str, Any]] = None) -> str:
    """The documented default config with ``RECIPES[recipe]`` and then ``values`` (``{"section.key":
    value}``, keys of the default config) set by confection, as ``load_config`` sets overrides;
    each value that differs from the default is written on its key's line, so the comments stay."""
    if recipe not in RECIPES:
        raise ConfigError(f"no recipe {recipe!r}: choose one of {', '.join(RECIPES)}")
    config = load_config(None, {**RECIPES[recipe], **(values or {})})
    default = load_config(None)
    unknown = set(flatten(config)) - set(flatten(default))
    if unknown:
        raise ConfigError(f"not keys of the default config: {', '.join(sorted(unknown))}")
    lines, section = [], ""
    for line in DEFAULT_CONFIG.lstrip("\n").splitlines():
        if line.startswith("["):
            section = line.strip("[] ")
        key, sep, _ = line.partition(" = ")
        if sep and config[section][key] != default[section][key]:
            line = f"{key} = {json.dumps(config[section][key])}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def config_text_for_model(options: BiLMOptions, model_path: str, recipe: str = "default") -> str:
    """``config_text(recipe)`` with [model] set to ``options`` and ``paths.init_bilm`` to
    ``model_path``."""
    return config_text(recipe, {**model_overrides(options), "paths.init_bilm": model_path})


def sparse_updates_wanted(settings: PretrainSettings, sampled: bool, step_kind: str = "eager") -> bool:
    """Whether the softmax rows are updated sparsely (see the [objective] comment): never in a
    recorded or compiled step, whose gradients have fixed shapes."""
    wanted = settings.objective.sparse_updates
    o = settings.optimizer
    possible = sampled and o.name == "adagrad" and not o.weight_decay and step_kind == "eager"
    if wanted is True and not possible:
        raise ConfigError(
            "[objective] sparse_updates = true needs the sampled softmax, [optimizer] name = "
            f"\"adagrad\", weight_decay = 0 and [training] step \"eager\" (got softmax "
            f"{'sampled' if sampled else 'full'}, {o.name}, weight_decay {o.weight_decay}, "
            f"step {step_kind})"
        )
    return possible if wanted == "auto" else wanted


def sampled_softmax_wanted(objective: ObjectiveSettings, vocab_size: int) -> bool:
    if objective.softmax == "auto":
        return vocab_size > 100_000
    return objective.softmax == "sampled"
