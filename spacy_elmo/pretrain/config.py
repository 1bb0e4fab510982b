"""The pretraining config: a spaCy-style (confection) file, validated into typed settings."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Annotated, Any, Dict, List, Literal, Optional, Union

from confection import Config
from pydantic import (
    BeforeValidator,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from ..nn.precision import TRAINING_PRECISIONS
from ..nn.threads import auto_threads
from ..options import ACTIVATIONS, BiLMOptions
from .corpus import CorpusSettings
from .optimizers import Fraction, OptimizerSettings
from .section import Section, describe_error

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
# CPU threads for torch (torch.set_num_threads), at least 1 (like every --threads of the CLI), or
# "auto": 2 where the process may use two cores (the two LSTM directions then train side by
# side, each on a thread of its own), else 1. 1 is safe on a shared machine (two processes each
# running a pool of all the cores' threads can be many times slower than either alone) and gives
# the same numbers on every machine: the weights are bitwise reproducible for the same seed and
# thread count only. On a dedicated machine, set it to the cores you want to use (--threads N).
threads = 1

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
# null disables clipping, which lets torch's fused LSTM (cuDNN) run on a GPU; the CPU runs the
# package's own loop either way.
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
# "sentences": batches of whole sentences (bucketed by length), each from zero LSTM states, as
# the biLM reads text at inference time. "windows": bilm-tf's batches, rows of running text
# (sentences one after another, split anywhere) of window_length tokens, training.batch_tokens /
# window_length rows, each row's LSTM states carried on to the next batch; every batch the same
# shape, which lets a GPU run the whole step as one graph (training.step).
batching = "sentences"
window_length = 20
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
# the softmax; otherwise the softmax starts fresh (released models come without one).
bilm = ${paths.init_bilm}
weight_file = null
# Train only the softmax for the first N steps (the biLM frozen, no gradient through it):
# a fresh softmax is random, and its first gradients would otherwise flow back into the
# trained biLM. Counted in training.max_steps and in the learning-rate schedule. Single process.
softmax_only_steps = 0

[training]
# Padded tokens per batch and per process, boundary tokens included (bilm-tf: 128 x 20).
batch_tokens = 2560
max_steps = 10000
# "fp32", "tf32" (TensorFloat-32 products on a GPU), "bf16" or "fp16" (autocast; fp16 adds a
# gradient scaler).
precision = "fp32"
# How each update runs: "eager" (op by op), "cuda_graph" (the whole update recorded once and
# replayed: windows on a GPU), "compile" (torch.compile; windows), or "auto": "cuda_graph" for
# windows on a GPU (not with fp16), else "eager".
step = "auto"
# "cuda_graph" and "compile": the fixed number of distinct tokens the character CNN encodes per
# batch (the batch's own, padded); a batch with more runs eagerly (logged as eager_steps).
# null: one per position of the forward windows (batch_tokens rounded down to whole windows).
distinct_tokens = null
eval_every = 1000
# Stop once this many evaluations in a row have not lowered the held-out perplexity, keeping the
# best evaluation's weights as the model files (null: run to max_steps). Needs corpus.dev.
patience = null
checkpoint_every = 1000
log_every = 50
"""


#: ``[training] step`` values (``static_step.resolve_step_kind``).
STEP_KINDS = ("auto", "eager", "cuda_graph", "compile")

class ConfigError(ValueError):
    """A pretraining config value that cannot be used, naming its key."""


def _auto_or_bool(value: Any) -> Union[str, bool]:
    # Literal["auto", True, False] would also take 1 and 0 (1 == True).
    if value != "auto" and not isinstance(value, bool):
        raise ValueError('must be "auto", true or false')
    return value


def _threads(value: Any) -> Union[int, str]:
    if value == "auto" and isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError('must be an integer >= 1 or "auto"')
    if value < 1:
        raise ValueError("must be >= 1")
    return value


class SystemSettings(Section):
    seed: int
    #: CPU threads of torch's intra-op pool (torch.set_num_threads), at least 1, or "auto"
    #: (``thread_count``). Results are bitwise reproducible only at the same
    #: thread count.
    threads: Annotated[Union[int, str], BeforeValidator(_threads)] = 1

    @property
    def thread_count(self) -> int:
        """``threads`` with "auto" resolved: the usable cores, at most ``AUTO_THREADS``. The
        trainer sets torch's thread count to it for the run (which owns the process), so unlike
        the pipe's "auto" it does not depend on the count torch runs with now."""
        return auto_threads() if self.threads == "auto" else self.threads


class ModelSettings(Section):
    """The biLM's shape; ``to_options`` adds the deeper checks of an options.json."""

    char_embedding_dim: PositiveInt
    filters: Annotated[List[List[PositiveInt]], Field(min_length=1)]
    n_highway: NonNegativeInt
    activation: Literal[ACTIVATIONS]
    lstm_dim: PositiveInt
    projection_dim: PositiveInt
    n_layers: PositiveInt
    cell_clip: Optional[NonNegativeFloat]
    proj_clip: Optional[NonNegativeFloat]
    use_skip_connections: bool = True

    def to_options(self) -> BiLMOptions:
        return BiLMOptions.from_dict(
            {
                "char_cnn": {
                    "activation": self.activation,
                    "embedding": {"dim": self.char_embedding_dim},
                    "filters": self.filters,
                    "n_highway": self.n_highway,
                },
                "lstm": {
                    "dim": self.lstm_dim,
                    "projection_dim": self.projection_dim,
                    "n_layers": self.n_layers,
                    "cell_clip": self.cell_clip,
                    "proj_clip": self.proj_clip,
                    "use_skip_connections": self.use_skip_connections,
                },
            },
            source="config [model]",
        )


class CorpusSection(CorpusSettings):
    """``[corpus]``: how text is read (``CorpusSettings``) plus where it is and how it is fed."""

    train: Optional[str]
    dev: Optional[str]
    shuffle_buffer: PositiveInt
    dev_max_tokens: Optional[PositiveInt]
    # Runs written before these keys existed batched sentences.
    batching: Literal["sentences", "windows"] = "sentences"
    window_length: Annotated[int, Field(ge=2)] = 20

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
            raise ValueError(f"spaCy has no language {value!r} (e.g. 'en', 'de', 'zh', 'xx')") from None
        return value


class VocabSettings(Section):
    path: Optional[str]
    size: Annotated[int, Field(ge=4)]
    min_count: PositiveInt


class ObjectiveSettings(Section):
    softmax: Literal["auto", "full", "sampled"]
    n_negative_samples: PositiveInt
    dropout: Fraction
    # Runs written before this key existed resume with its default.
    sparse_updates: Annotated[Union[str, bool], BeforeValidator(_auto_or_bool)] = "auto"


class InitializeSettings(Section):
    # Configs written before [initialize] existed start from random weights.
    bilm: Optional[str] = None
    weight_file: Optional[str] = None
    # Runs written before this key existed train everything from the first step.
    softmax_only_steps: Annotated[int, Field(ge=0)] = 0


class TrainingSettings(Section):
    batch_tokens: PositiveInt
    max_steps: PositiveInt
    precision: Literal[TRAINING_PRECISIONS]
    eval_every: PositiveInt
    checkpoint_every: PositiveInt
    log_every: PositiveInt
    # Runs written before these keys existed ran eagerly.
    step: Literal[STEP_KINDS] = "auto"
    distinct_tokens: Optional[PositiveInt] = None
    # Runs written before this key existed ran to max_steps.
    patience: Optional[PositiveInt] = None


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

    @property
    def options(self) -> BiLMOptions:
        """The biLM's shape, from [model]."""
        if self._options is None:
            self._options = self.model.to_options()
        return self._options

    @property
    def config(self) -> Optional[Config]:
        """The config these settings were parsed from."""
        return self._config

    def written_config(self) -> Config:
        """What a run writes as its config.cfg: the config as parsed, with the thread count it
        runs with (a config written before ``[system] threads`` existed gets the default)."""
        config = copy.deepcopy(self._config)
        config.setdefault("system", {})["threads"] = self.system.threads
        return config


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
    """Validate an interpolated config (``load_config``); a ``ConfigError`` names every wrong
    key as ``[section] key: what is expected, got value``."""
    try:
        settings = PretrainSettings.model_validate(dict(config))
    except ValidationError as err:
        problems = [describe_error(e, PretrainSettings) for e in err.errors()]
        raise ConfigError("; ".join(problems)) from None
    _ = settings.options  # the deeper [model] checks (OptionsError), now rather than later
    windows = settings.corpus.batching == "windows"
    check_step(settings.training.step, windows, settings.training.precision)
    if windows and settings.training.batch_tokens < settings.corpus.window_length:
        raise ConfigError(
            f"training.batch_tokens ({settings.training.batch_tokens}) must hold at least one window "
            f"of corpus.window_length ({settings.corpus.window_length}) tokens"
        )
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


#: The released "original" biLM's shape (93.6M parameters).
ORIGINAL_SHAPE = {
    "model.char_embedding_dim": 16,
    "model.filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
    "model.n_highway": 2,
    "model.activation": "relu",
    "model.lstm_dim": 4096,
    "model.projection_dim": 512,
    "model.n_layers": 2,
    "model.use_skip_connections": True,
}

#: bilm-tf's training of the original model (bilm/train.py, the paper's section 3): cell and
#: projection clip 3, windows of 20 tokens in rows of 128, sampled softmax with 8,192
#: negatives, Adagrad at 0.2 (accumulators from 1.0), gradients clipped to norm 10, dropout 0.1,
#: the words seen at least 3 times (793,471 in the 1B Word Benchmark).
BILM_TF_RECIPE = {
    **ORIGINAL_SHAPE,
    "model.cell_clip": 3.0,
    "model.proj_clip": 3.0,
    "corpus.batching": "windows",
    "corpus.window_length": 20,
    "training.batch_tokens": 2560,
    "vocab.size": 800000,
    "vocab.min_count": 3,
    "objective.softmax": "sampled",
    "objective.n_negative_samples": 8192,
    "objective.dropout": 0.1,
    "optimizer.name": "adagrad",
    "optimizer.learning_rate": 0.2,
    "optimizer.initial_accumulator_value": 1.0,
    "optimizer.clip_norm": 10.0,
    "optimizer.warmup_steps": 0,
    "optimizer.schedule": "constant",
}

#: Named starting points of ``init-config --recipe``: overrides of the documented default.
#: "default": a small model that trains on a CPU, on sentences. "bilm-tf": the released
#: original shape as bilm-tf trained it. "fast": the same without cell and projection clipping,
#: which lets torch's fused LSTM (cuDNN) run on a GPU; docs/manual.md gives what it costs in
#: held-out perplexity.
RECIPES: Dict[str, Dict[str, Any]] = {
    "default": {},
    "bilm-tf": BILM_TF_RECIPE,
    "fast": {**BILM_TF_RECIPE, "model.cell_clip": None, "model.proj_clip": None},
}


def config_text(recipe: str = "default", values: Optional[Dict[str, Any]] = None) -> str:
    """The documented default config (comments kept) with ``RECIPES[recipe]`` and then
    ``values`` (``{"section.key": value}``, keys of the default config) set in it."""
    if recipe not in RECIPES:
        raise ConfigError(f"no recipe {recipe!r}: choose one of {', '.join(RECIPES)}")
    values = {**RECIPES[recipe], **(values or {})}
    lines, section, written = [], "", set()
    for line in DEFAULT_CONFIG.lstrip("\n").splitlines():
        if line.startswith("["):
            section = line.strip("[] ")
        key, sep, _ = line.partition(" = ")
        if sep and f"{section}.{key}" in values:
            line = f"{key} = {json.dumps(values[f'{section}.{key}'])}"
            written.add(f"{section}.{key}")
        lines.append(line)
    missing = set(values) - written
    if missing:
        raise ConfigError(f"not keys of the default config: {', '.join(sorted(missing))}")
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
