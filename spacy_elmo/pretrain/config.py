"""The pretraining config: a spaCy-style (confection) file, validated into typed settings."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Union

from confection import Config

from ..nn.precision import TRAINING_PRECISIONS
from ..options import BiLMOptions
from .optimizers import OptimizerSettings, optimizers, schedules
from .corpus import CorpusSettings

DEFAULT_CONFIG = """
# Pretraining config for spacy_elmo. Write a copy with `python -m spacy_elmo init-config`.
# Any value can be overridden on the command line: --training.max_steps 1000

[paths]
train = null
dev = null
vocab = null
init_bilm = null

[system]
seed = 0

# The biLM's shape: the fields of the released options.json. The defaults are a small model
# that trains on a CPU; the released "original" model is
# filters [[1,32],[2,32],[3,64],[4,128],[5,256],[6,512],[7,1024]], n_highway 2,
# lstm_dim 4096, projection_dim 512, cell_clip 3, proj_clip 3.
[model]
char_embedding_dim = 16
filters = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]]
n_highway = 1
activation = "relu"
lstm_dim = 512
projection_dim = 128
n_layers = 2
# null disables clipping, which lets the fused (cuDNN / oneDNN) LSTM kernel run.
cell_clip = null
proj_clip = null
use_skip_connections = true

[corpus]
train = ${paths.train}
dev = ${paths.dev}
# true: lines are already tokenized (split on whitespace); false: spaCy's tokenizer for `lang`.
tokenized = true
lang = "en"
# Cut lines into sentences (the biLM reads sentences at inference time).
split_sentences = true
max_sequence_length = 100
# Lines that are not valid UTF-8: "skip" (counted in the metrics) or "raise".
on_decode_error = "skip"
# Sequences shuffled together, then bucketed by length.
shuffle_buffer = 10000
# Cap the tokens scored in each held-out evaluation (null: the whole dev file).
dev_max_tokens = null

[vocab]
# An existing vocab.txt (<S>, </S>, <UNK>, then words by frequency), or null to build one.
path = ${paths.vocab}
size = 50000
min_count = 1

[objective]
# "full" softmax, "sampled" softmax, or "auto" (sampled when the vocabulary exceeds 100k).
softmax = "auto"
n_negative_samples = 8192
dropout = 0.1
# Sampled softmax with adagrad: update only the softmax rows each step uses (bilm-tf's sparse
# updates; the same numbers as dense Adagrad without a dense vocab x dim gradient per step, and
# data parallel ranks exchange those rows instead of the whole softmax). "auto": whenever the
# softmax is sampled, the optimizer adagrad and weight_decay 0; true: require it; false: dense.
sparse_updates = "auto"

[optimizer]
# "adagrad" (the paper's: lr 0.2, initial accumulator 1.0) or "adam".
name = "adam"
learning_rate = 0.002
initial_accumulator_value = 1.0
beta1 = 0.9
beta2 = 0.999
weight_decay = 0.0
# Gradients are clipped to this global norm (bilm-tf: 10).
clip_norm = 10.0
warmup_steps = 200
# "constant" or "linear" decay to 0 at training.max_steps (after warmup).
schedule = "linear"

[initialize]
# Start from an existing biLM instead of random weights (continued pretraining, e.g. on text of
# your domain): a released model directory (options.json + weights.hdf5), the name of a model
# downloaded with `python -m spacy_elmo download NAME`, a pretraining output
# directory, or an options.json with its weight_file. [model] must describe the same shape:
# `python -m spacy_elmo init-config CONFIG --model DIR` writes a config that does. A pretraining
# output directory whose vocab.txt is this run's vocabulary (set vocab.path to it) also gives
# the softmax; otherwise the softmax starts fresh.
bilm = ${paths.init_bilm}
weight_file = null

[training]
# Padded tokens per batch and per process, boundary tokens included (bilm-tf: 128 x 20).
batch_tokens = 2560
max_steps = 10000
# "fp32", "bf16" or "fp16" (autocast; fp16 adds a gradient scaler).
precision = "fp32"
eval_every = 1000
checkpoint_every = 1000
log_every = 50
"""


class ConfigError(ValueError):
    """A pretraining config value that cannot be used, naming its key."""


@dataclass
class ObjectiveSettings:
    softmax: str
    n_negative_samples: int
    dropout: float
    sparse_updates: Union[str, bool] = "auto"


@dataclass
class TrainingSettings:
    batch_tokens: int
    max_steps: int
    precision: str
    eval_every: int
    checkpoint_every: int
    log_every: int


@dataclass
class PretrainSettings:
    """Everything the trainer needs, validated."""

    options: BiLMOptions
    train: str
    dev: Optional[str]
    corpus: CorpusSettings
    shuffle_buffer: int
    dev_max_tokens: Optional[int]
    vocab_path: Optional[str]
    vocab_size: int
    vocab_min_count: int
    objective: ObjectiveSettings
    optimizer: OptimizerSettings
    training: TrainingSettings
    seed: int
    init_bilm: Optional[str] = None
    init_weight_file: Optional[str] = None
    #: The config these settings were parsed from: what a run writes as its config.cfg.
    config: Optional[Config] = None


def default_config() -> Config:
    """The default config, not yet interpolated (``${paths.train}`` still a reference)."""
    return Config().from_str(DEFAULT_CONFIG, interpolate=False)


def load_config(
    path: Optional[Union[str, Path]] = None, overrides: Optional[Dict[str, Any]] = None
) -> Config:
    """Read a config file (or the default), apply ``{"section.key": value}`` overrides and
    interpolate ``${...}`` references."""
    if path is None:
        config = default_config()
    else:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"pretraining config not found: {path}")
        config = Config().from_disk(path, interpolate=False)
    for key, value in (overrides or {}).items():
        section, _, name = key.partition(".")
        if not name or section not in config:
            raise ConfigError(f"override {key!r} does not name a key of a config section")
        config[section][name] = value
    return config.interpolate()


def parse_settings(config: Config) -> PretrainSettings:
    get = _Getter(config)
    model = get.section("model")
    options = BiLMOptions.from_dict(
        {
            "char_cnn": {
                "activation": model.get("activation"),
                "embedding": {"dim": model.get("char_embedding_dim")},
                "filters": model.get("filters"),
                "n_highway": model.get("n_highway"),
            },
            "lstm": {
                "dim": model.get("lstm_dim"),
                "projection_dim": model.get("projection_dim"),
                "n_layers": model.get("n_layers"),
                "cell_clip": model.get("cell_clip"),
                "proj_clip": model.get("proj_clip"),
                "use_skip_connections": model.get("use_skip_connections", True),
            },
        },
        source="config [model]",
    )
    train = get("corpus", "train", (str,))
    if train is None:
        raise ConfigError("corpus.train (or paths.train) must name the training text")
    corpus = CorpusSettings(
        tokenized=get("corpus", "tokenized", (bool,)),
        lang=get("corpus", "lang", (str,)),
        split_sentences=get("corpus", "split_sentences", (bool,)),
        max_sequence_length=get.positive_int("corpus", "max_sequence_length"),
        on_decode_error=get("corpus", "on_decode_error", (str,)),
    )
    objective = ObjectiveSettings(
        softmax=get.choice("objective", "softmax", ("auto", "full", "sampled")),
        n_negative_samples=get.positive_int("objective", "n_negative_samples"),
        dropout=get.fraction("objective", "dropout"),
        sparse_updates=_sparse_updates(get.section("objective")),
    )
    optimizer = OptimizerSettings(
        name=get.choice("optimizer", "name", tuple(sorted(optimizers.get_all()))),
        learning_rate=get.positive_float("optimizer", "learning_rate"),
        initial_accumulator_value=get("optimizer", "initial_accumulator_value", (int, float)),
        beta1=get.fraction("optimizer", "beta1"),
        beta2=get.fraction("optimizer", "beta2"),
        weight_decay=get("optimizer", "weight_decay", (int, float)),
        clip_norm=get("optimizer", "clip_norm", (int, float), allow_none=True),
        warmup_steps=get.positive_int("optimizer", "warmup_steps", minimum=0),
        schedule=get.choice("optimizer", "schedule", tuple(sorted(schedules.get_all()))),
    )
    training = TrainingSettings(
        batch_tokens=get.positive_int("training", "batch_tokens"),
        max_steps=get.positive_int("training", "max_steps"),
        precision=get.choice("training", "precision", TRAINING_PRECISIONS),
        eval_every=get.positive_int("training", "eval_every"),
        checkpoint_every=get.positive_int("training", "checkpoint_every"),
        log_every=get.positive_int("training", "log_every"),
    )
    return PretrainSettings(
        options=options,
        train=train,
        dev=get("corpus", "dev", (str,), allow_none=True),
        corpus=corpus,
        shuffle_buffer=get.positive_int("corpus", "shuffle_buffer"),
        dev_max_tokens=get("corpus", "dev_max_tokens", (int,), allow_none=True),
        vocab_path=get("vocab", "path", (str,), allow_none=True),
        vocab_size=get.positive_int("vocab", "size", minimum=4),
        vocab_min_count=get.positive_int("vocab", "min_count"),
        objective=objective,
        optimizer=optimizer,
        training=training,
        seed=get("system", "seed", (int,)),
        # configs written before [initialize] existed start from random weights
        init_bilm=_optional_path(config, "initialize", "bilm"),
        init_weight_file=_optional_path(config, "initialize", "weight_file"),
        config=config,
    )


def model_overrides(options: BiLMOptions) -> Dict[str, Any]:
    """``{"model.key": value}``: the [model] section that describes ``options``."""
    cnn, lstm = options.char_cnn, options.lstm
    return {
        "model.char_embedding_dim": cnn.embedding_dim,
        "model.filters": [list(f) for f in cnn.filters],
        "model.n_highway": cnn.n_highway,
        "model.activation": cnn.activation,
        "model.lstm_dim": lstm.dim,
        "model.projection_dim": lstm.projection_dim,
        "model.n_layers": lstm.n_layers,
        "model.cell_clip": lstm.cell_clip,
        "model.proj_clip": lstm.proj_clip,
        "model.use_skip_connections": lstm.use_skip_connections,
    }


def config_text_for_model(options: BiLMOptions, model_path: str) -> str:
    """The documented default config (comments kept) with [model] set to ``options`` and
    ``paths.init_bilm`` to ``model_path``."""
    values = {**model_overrides(options), "paths.init_bilm": model_path}
    lines, section = [], ""
    for line in DEFAULT_CONFIG.lstrip("\n").splitlines():
        if line.startswith("["):
            section = line.strip("[] ")
        key, sep, _ = line.partition(" = ")
        if sep and f"{section}.{key}" in values:
            line = f"{key} = {json.dumps(values[f'{section}.{key}'])}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def _optional_path(config: Config, section: str, key: str) -> Optional[str]:
    value = config.get(section, {}).get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"config key {section}.{key} must be a path or null, got {value!r}")
    return value


def _sparse_updates(objective: Dict[str, Any]) -> Union[str, bool]:
    # Runs written before this key existed resume with its default.
    value = objective.get("sparse_updates", "auto")
    if value != "auto" and not isinstance(value, bool):
        raise ConfigError(
            f"config key objective.sparse_updates must be \"auto\", true or false, got {value!r}"
        )
    return value


class _Getter:
    """Typed access to config values with errors that name ``section.key``."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def section(self, name: str) -> Dict[str, Any]:
        if name not in self.config or not isinstance(self.config[name], dict):
            raise ConfigError(f"the config has no [{name}] section")
        return self.config[name]

    def __call__(self, section: str, key: str, types: tuple, allow_none: bool = False) -> Any:
        values = self.section(section)
        if key not in values:
            raise ConfigError(f"config key {section}.{key} is missing")
        value = values[key]
        if value is None and (allow_none or section == "corpus" and key == "train"):
            return None
        if isinstance(value, bool) and bool not in types:
            value = None  # bool is an int subclass; refuse it for numbers
        if not isinstance(value, types):
            names = " or ".join(t.__name__ for t in types)
            raise ConfigError(f"config key {section}.{key} must be {names}, got {values[key]!r}")
        return value

    def positive_int(self, section: str, key: str, minimum: int = 1) -> int:
        value = self(section, key, (int,))
        if value < minimum:
            raise ConfigError(f"config key {section}.{key} must be >= {minimum}, got {value}")
        return value

    def positive_float(self, section: str, key: str) -> float:
        value = float(self(section, key, (int, float)))
        if value <= 0:
            raise ConfigError(f"config key {section}.{key} must be > 0, got {value}")
        return value

    def fraction(self, section: str, key: str) -> float:
        value = float(self(section, key, (int, float)))
        if not 0.0 <= value < 1.0:
            raise ConfigError(f"config key {section}.{key} must be in [0, 1), got {value}")
        return value

    def choice(self, section: str, key: str, choices: tuple) -> str:
        value = self(section, key, (str,))
        if value not in choices:
            raise ConfigError(f"config key {section}.{key} must be one of {choices}, got {value!r}")
        return value


def sparse_updates_wanted(settings: PretrainSettings, sampled: bool) -> bool:
    """Whether the softmax rows are updated sparsely (see the [objective] comment)."""
    wanted = settings.objective.sparse_updates
    o = settings.optimizer
    possible = sampled and o.name == "adagrad" and not o.weight_decay
    if wanted is True and not possible:
        raise ConfigError(
            "objective.sparse_updates = true needs the sampled softmax, optimizer.name = "
            f"\"adagrad\" and optimizer.weight_decay = 0 (got softmax "
            f"{'sampled' if sampled else 'full'}, {o.name}, weight_decay {o.weight_decay})"
        )
    return possible if wanted == "auto" else wanted


def sampled_softmax_wanted(objective: ObjectiveSettings, vocab_size: int) -> bool:
    if objective.softmax == "auto":
        return vocab_size > 100_000
    return objective.softmax == "sampled"
