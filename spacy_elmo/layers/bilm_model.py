"""The biLM as a Thinc model: a ``BiLMRunner`` in a PyTorch shim, ``Model[List[List[str]],
List[Floats3d]]`` (one ``(n_layers + 1, n_tokens, 2 * projection_dim)`` array per sequence). Weights
arrive through ``load_weights`` (the manual's "Design"); the runtime settings (``ElmoModelSettings``)
live in ``model.attrs``, which Thinc does not save, so config overrides at ``spacy.load`` take
effect.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import torch
from thinc.api import (
    ArgsKwargs,
    CupyOps,
    Model,
    PyTorchShim,
    get_current_ops,
    get_torch_default_device,
    torch2xp,
    xp2torch,
)
from thinc.types import Floats3d

from ..formats import VOCAB_NAME, WeightSource
from ..formats.native import bilm_from_bytes, bilm_to_bytes
from ..nn.bilm import BiLM
from ..nn.runner import BiLMRunner
from ..nn.thread_warning import warn_if_threads_compete
from ..nn.threads import auto_threads, resolve_threads
from ..sources import load_bilm_from, resolve_weight_source

SETTINGS = "elmo_settings"
#: The token-cache words read when the weights were loaded: serialised with the model (a list of
#: str), so a restored pipeline rebuilds its cache without the vocabulary file.
CACHE_WORDS = "elmo_token_cache_words"


class ElmoModelSettings(SimpleNamespace):
    """``spacy_elmo.ElmoModel.v2``'s arguments, as that registered function declares and checks
    them. Kept in ``model.attrs``, where Thinc saves only what msgpack can write: not this, so a
    restored model runs with its config's settings (overrides at ``spacy.load`` take effect)."""


class BiLMShim(PyTorchShim):
    """Thinc's PyTorch shim holding one ``BiLMRunner`` for life: weights arrive in it
    (``replace_bilm``), so ``runner`` is always the module the shim runs, copies included."""

    @property
    def runner(self) -> BiLMRunner:
        """The runner the shim runs: its ``_model``."""
        return self._model


def elmo_model(settings: ElmoModelSettings) -> Model[List[List[str]], List[Floats3d]]:
    """The biLM model, without weights until its init, ``load_weights`` or ``from_bytes``."""
    shim = BiLMShim(
        BiLMRunner(), device=torch_device(), serialize_model=_runner_to_bytes, deserialize_model=_runner_from_bytes
    )
    return Model(
        "elmo",
        _forward,
        init=_init,
        shims=[shim],
        dims={"nO": None},
        attrs={SETTINGS: settings},
    )


def bilm_settings(model: Model) -> ElmoModelSettings:
    return model.attrs[SETTINGS]


def get_runner(model: Model) -> Optional[BiLMRunner]:
    """The runner inside an ``ElmoModel``, or None before its weights are there."""
    runner = _shim(model).runner
    return runner if runner.bilm is not None else None


@contextmanager
def naming_pipe(name: str) -> Iterator[None]:
    """Errors reading a pipe's weights, prefixed with the pipe's name (a pipeline has several)."""
    try:
        yield
    except (FileNotFoundError, ValueError) as err:
        raise type(err)(f"elmo pipe '{name}': {err}") from None


def configured_source(model: Model) -> WeightSource:
    """The files the settings name (``spacy_elmo.sources``); missing ones raise here."""
    s = bilm_settings(model)
    return resolve_weight_source(s.weights, s.options_file, s.weight_file)


def ensure_bilm(model: Model) -> BiLMRunner:
    """The runner, its configured weights read first if it has none, with the settings on."""
    runner = get_runner(model)
    if runner is None:
        model.initialize()
        runner = get_runner(model)
    _apply_settings(model, runner)
    return runner


def load_weights(model: Model, source: WeightSource) -> BiLMRunner:
    """Read the biLM of ``source`` into the model, and the words that pre-fill the token cache
    (``token_cache_vocab``, else the vocabulary beside the weights)."""
    settings = bilm_settings(model)
    vocab = Path(settings.token_cache_vocab) if settings.token_cache_vocab else source.directory / VOCAB_NAME
    if settings.token_cache_words and (settings.token_cache_vocab or vocab.is_file()):
        model.attrs[CACHE_WORDS] = read_cache_words(vocab, settings.token_cache_words)
    return set_bilm(model, load_bilm_from(source))


def set_bilm(model: Model, bilm: BiLM) -> BiLMRunner:
    """Put ``bilm`` (eval mode) into an ``ElmoModel``, on the device of the current Thinc ops."""
    runner = _shim(model).runner
    runner.replace_bilm(bilm.to(torch_device()).eval())
    model.set_dim("nO", bilm.output_dim, force=True)
    _apply_settings(model, runner)
    return runner


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
    """Thinc's torch device; a clear error for a ``spacy.require_gpu()`` PyTorch cannot see."""
    if isinstance(get_current_ops(), CupyOps) and not torch.cuda.is_available():
        raise ValueError(
            "spaCy is set to run on the GPU (spacy.require_gpu / prefer_gpu), but PyTorch "
            f"{torch.__version__} sees no CUDA device (torch.cuda.is_available() is False): "
            "install a CUDA build of PyTorch, or run on the CPU"
        )
    return get_torch_default_device()


def _shim(model: Model) -> BiLMShim:
    return model.shims[0]


def _apply_settings(model: Model, runner: BiLMRunner) -> None:
    """The settings' precision, threads and token cache on the runner. Idempotent: every forward
    applies them, so a runner restored from bytes runs as configured."""
    settings = bilm_settings(model)
    runner.precision = settings.precision
    runner.threads = resolve_threads(settings.threads)
    warn_if_threads_compete(settings.threads, auto_threads(), runner.bilm.token_encoder.projection.weight.device)
    n_words = settings.token_cache_words
    if not n_words:
        runner.clear_token_cache()
    elif runner.token_cache is None or runner.token_cache.max_words != n_words:
        runner.cache_token_embeddings(model.attrs.get(CACHE_WORDS, [])[:n_words], n_words)


def _init(model: Model, X=None, Y=None) -> Model:
    """Thinc's init: the configured weights, unless the model has weights already."""
    if get_runner(model) is None:
        load_weights(model, configured_source(model))
    return model


def _runner_to_bytes(runner: BiLMRunner) -> bytes:
    return bilm_to_bytes(runner.bilm)


def _runner_from_bytes(runner: BiLMRunner, data: bytes, device: torch.device) -> BiLMRunner:
    """The weights of ``data`` in the shim's own runner (see ``BiLMShim``)."""
    bilm = bilm_from_bytes(data)
    runner.replace_bilm(None if bilm is None else bilm.to(device))
    return runner


def _forward(model: Model, sequences: List[List[str]], is_train: bool) -> Tuple[List[Floats3d], Callable]:
    """Token sequences -> one (n_layers + 1, n_i, width) array each; backprop into the biLM."""
    shim = _shim(model)
    runner = get_runner(model)
    if runner is None:
        raise ValueError(
            "spacy_elmo.ElmoModel has no weights yet: call model.initialize() or "
            "set_bilm(model, load_bilm(...)), load it with from_bytes, or use it through the "
            "'elmo' pipe"
        )
    _apply_settings(model, runner)  # also on a runner just restored from bytes
    char_ids = torch.from_numpy(runner.bilm.batch_to_ids(sequences)).to(shim.device)
    (layers, _mask), torch_backprop = shim(ArgsKwargs(args=(char_ids,), kwargs={}), is_train)
    lengths = [len(sequence) for sequence in sequences]
    detached = layers.detach()
    arrays = [torch2xp(detached[:, i, :n].contiguous()) for i, n in enumerate(lengths)]

    def backprop(d_arrays: Sequence[Floats3d]) -> List:
        d_layers = torch.zeros_like(detached)
        for i, (n, d_array) in enumerate(zip(lengths, d_arrays)):
            d_layers[:, i, :n] = xp2torch(d_array, device=layers.device)
        torch_backprop(ArgsKwargs(args=(layers,), kwargs={"grad_tensors": d_layers}))
        return []

    return arrays, backprop
