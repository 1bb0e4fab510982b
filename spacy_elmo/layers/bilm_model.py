"""The biLM as a Thinc model: the PyTorch ``BiLM`` in a ``PyTorchWrapper``, with what it needs to run.

``Model[List[List[str]], List[Floats3d]]``: a batch of tokenized sequences -> one array per
sequence of shape ``(n_layers + 1, n_tokens, 2 * projection_dim)`` (float32, on the model's
device: NumPy on the CPU, CuPy after ``spacy.require_gpu()``).

The model carries its runtime settings (``BiLMSettings``: which weights, precision, batch and
sequence sizes, threads, token cache; the ``spacy_elmo.ElmoModel.v2`` block of a config) in
``model.attrs``, where Thinc's serialisation skips them: they come from the config each time a
pipeline is built, so an override at ``spacy.load`` takes effect. The weights themselves travel
in ``model.to_bytes()`` (the native format's options + safetensors), so a model restored with
``from_bytes`` needs neither the original files nor ``initialize``; until then, ``ensure_bilm``
reads the configured files on first use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple, Union

import torch
from thinc.api import (
    ArgsKwargs,
    CupyOps,
    Model,
    PyTorchWrapper_v3,
    get_current_ops,
    get_torch_default_device,
    torch2xp,
    xp2torch,
)
from thinc.types import Floats3d

from ..formats import VOCAB_NAME, WeightSource
from ..formats.native import bilm_from_bytes, bilm_to_bytes
from ..nn.bilm import BiLM
from ..nn.precision import get_precision
from ..nn.threads import check_threads
from ..sources import check_weight_settings, load_bilm_from, resolve_weight_source

SETTINGS = "elmo_settings"
SOURCE = "elmo_source"
#: The token-cache words read when the weights were loaded: serialised with the model (a list of
#: str), so a restored pipeline rebuilds its cache without the vocabulary file.
CACHE_WORDS = "elmo_token_cache_words"


@dataclass(frozen=True)
class BiLMSettings:
    """What the biLM needs to run, as ``spacy_elmo.ElmoModel.v2`` takes it (see its docstring)."""

    weights: Optional[str] = None
    options_file: Optional[str] = None
    weight_file: Optional[str] = None
    precision: str = "fp32"
    max_sequence_length: int = 256
    max_batch_tokens: int = 4096
    threads: Optional[Union[int, str]] = "auto"
    token_cache_words: int = 0
    token_cache_vocab: Optional[str] = None

    def __post_init__(self) -> None:
        check_weight_settings(self.weights, self.options_file, self.weight_file)
        get_precision(self.precision, "precision")
        for key, minimum in (("max_sequence_length", 1), ("max_batch_tokens", 1), ("token_cache_words", 0)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                kind = "a positive integer" if minimum else "a non-negative integer"
                raise ValueError(f"{key} must be {kind}, got {value!r}")
        check_threads(self.threads, "threads")

    def replace(self, **changes) -> "BiLMSettings":
        return dataclasses.replace(self, **changes)


def elmo_model(settings: BiLMSettings) -> Model[List[List[str]], List[Floats3d]]:
    """The biLM wrapper, without weights until ``ensure_bilm`` reads the configured ones,
    ``load_weights`` / ``set_bilm`` give it some, or ``from_bytes`` restores them."""
    model = PyTorchWrapper_v3(
        None,
        convert_inputs=_tokens_to_char_ids,
        convert_outputs=_layers_to_arrays,
        device=torch_device(),
        serialize_model=bilm_to_bytes,
        deserialize_model=_bilm_from_bytes,
    )
    model.name = "elmo"
    model.attrs[SETTINGS] = settings
    return model


def bilm_settings(model: Model) -> BiLMSettings:
    return model.attrs[SETTINGS]


def set_settings(model: Model, settings: BiLMSettings) -> None:
    """Replace the runtime settings (the weights they name are resolved again when needed)."""
    model.attrs[SETTINGS] = settings
    model.attrs.pop(SOURCE, None)
    bilm = get_bilm(model)
    if bilm is not None:
        bilm.precision = settings.precision


def weight_source(model: Model) -> WeightSource:
    """The files the settings name (``spacy_elmo.sources``: a name, a directory, two files, or
    the bundled model), resolved once; a missing file or unknown name raises here."""
    if SOURCE not in model.attrs:
        s = bilm_settings(model)
        model.attrs[SOURCE] = resolve_weight_source(s.weights, s.options_file, s.weight_file)
    return model.attrs[SOURCE]


def get_bilm(model: Model) -> Optional[BiLM]:
    """The BiLM inside an ``ElmoModel``, or None before its weights are loaded."""
    return model.shims[0]._model


def ensure_bilm(model: Model) -> BiLM:
    """The BiLM, its configured weights read first if it has none, with the settings' precision
    and token cache in force."""
    bilm = get_bilm(model)
    if bilm is None:
        bilm = load_weights(model, weight_source(model))
    settings = bilm_settings(model)
    bilm.precision = settings.precision
    n_words = settings.token_cache_words
    if n_words and (bilm.token_cache is None or bilm.token_cache.max_words != n_words):
        bilm.cache_token_embeddings(model.attrs.get(CACHE_WORDS, [])[:n_words], n_words)
    return bilm


def load_weights(model: Model, source: WeightSource) -> BiLM:
    """Read the biLM of ``source`` into the model, with the words that pre-fill the token cache
    when the settings ask for one: the first lines of ``token_cache_vocab``, else of the
    vocabulary file beside the weights if there is one (released models have none: their cache
    fills from the text alone)."""
    settings = bilm_settings(model)
    if settings.token_cache_words:
        if settings.token_cache_vocab:
            model.attrs[CACHE_WORDS] = read_cache_words(Path(settings.token_cache_vocab), settings.token_cache_words)
        elif (source.directory / VOCAB_NAME).is_file():
            model.attrs[CACHE_WORDS] = read_cache_words(source.directory / VOCAB_NAME, settings.token_cache_words)
    bilm = load_bilm_from(source)
    set_bilm(model, bilm)
    return bilm


def set_bilm(model: Model, bilm: BiLM) -> None:
    """Put ``bilm`` (eval mode) into an ``ElmoModel``, on the device of the current Thinc ops."""
    model.shims[0]._model = bilm.to(torch_device()).eval()
    model.set_dim("nO", bilm.output_dim, force=True)


def read_cache_words(vocab_file: Path, n_words: int) -> List[str]:
    """The first ``n_words`` lines of a vocabulary file (one word per line, most frequent first)."""
    if not vocab_file.is_file():
        raise ValueError(
            f"token_cache_vocab: {vocab_file} does not exist (a vocabulary file, one word per "
            f"line, most frequent first, whose first {n_words} words pre-fill the token cache); "
            "set token_cache_vocab = null to fill the cache from the text alone"
        )
    with vocab_file.open(encoding="utf-8") as lines:
        words = [line.rstrip("\r\n") for line, _ in zip(lines, range(n_words))]
    return [word for word in words if word]


def torch_device() -> torch.device:
    """Thinc's default torch device, with a clear error when spaCy was told to use a GPU
    (``spacy.require_gpu()``) that PyTorch cannot see."""
    if isinstance(get_current_ops(), CupyOps) and not torch.cuda.is_available():
        raise ValueError(
            "spaCy is set to run on the GPU (spacy.require_gpu / prefer_gpu), but PyTorch "
            f"{torch.__version__} sees no CUDA device (torch.cuda.is_available() is False): "
            "install a CUDA build of PyTorch, or run on the CPU"
        )
    return get_torch_default_device()


def _bilm_from_bytes(current: Optional[BiLM], data: bytes, device: torch.device) -> Optional[BiLM]:
    bilm = bilm_from_bytes(data)
    return None if bilm is None else bilm.to(device)


def _tokens_to_char_ids(
    model: Model, sequences: List[List[str]], is_train: bool
) -> Tuple[ArgsKwargs, Callable]:
    shim = model.shims[0]
    if shim._model is None:
        raise ValueError(
            "spacy_elmo.ElmoModel has no weights yet: call ensure_bilm(model) or "
            "set_bilm(model, load_bilm(...)), load it with from_bytes, or use it through the "
            "'elmo' pipe"
        )
    char_ids = torch.from_numpy(shim._model.batch_to_ids(sequences)).to(shim.device)
    return ArgsKwargs(args=(char_ids,), kwargs={}), lambda d_inputs: []


def _layers_to_arrays(
    model: Model, inputs_outputs: Tuple, is_train: bool
) -> Tuple[List[Floats3d], Callable]:
    """(layers (n_layers + 1, batch, max_len, width), mask) -> one (n_layers + 1, n_i, width)
    array per sequence; the backward pass pads the gradients back into the batch tensor."""
    sequences, (layers, _mask) = inputs_outputs
    lengths = [len(sequence) for sequence in sequences]
    detached = layers.detach()
    arrays = [torch2xp(detached[:, i, :n].contiguous()) for i, n in enumerate(lengths)]

    def backprop(d_arrays: List[Floats3d]) -> ArgsKwargs:
        d_layers = torch.zeros_like(detached)
        for i, (n, d_array) in enumerate(zip(lengths, d_arrays)):
            d_layers[:, i, :n] = xp2torch(d_array, device=layers.device)
        return ArgsKwargs(args=(layers,), kwargs={"grad_tensors": d_layers})

    return arrays, backprop
