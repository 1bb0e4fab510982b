"""The biLM as a Thinc model: a ``BiLMRunner`` in a PyTorch shim, ``Model[List[List[str]],
List[Floats3d]]`` (one ``(n_layers + 1, n_tokens, 2 * projection_dim)`` array per sequence).

Weights take one road in: the model's Thinc init (``_init``) reads them from its weight loader, the
files the model block names, unless the pipe handed it the ``[initialize]`` block's registered
loader (``use_weight_loader``), as spacy-curated-transformers loads its encoders; ``from_bytes``
restores saved ones instead, and ``set_bilm`` puts a biLM in from Python. The one lazy hook is
``initialized``: a model used before its init ran (a pipe run straight after ``add_pipe``, or frozen,
which ``spacy train`` does not initialize) runs it then. The runtime settings
(``ElmoModelSettings``) live in ``model.attrs``, applied to the runner when it is made (its
precision and threads: "auto" is decided then) and when weights arrive (its token cache,
``BiLMShim``).
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, ContextManager, Iterator, List, Optional, Sequence, Tuple

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
from ..nn.threads import auto_threads, one_op_thread, resolve_threads
from ..sources import load_bilm_from

SETTINGS = "elmo_settings"
LOADER = "elmo_weight_loader"
WeightLoader = Callable[[], WeightSource]


class ElmoModelSettings(SimpleNamespace):
    """``spacy_elmo.ElmoModel.v2``'s arguments, as that registered function declares and checks
    them. Kept in ``model.attrs``, where Thinc saves only what msgpack can write: not this (nor the
    weight loader), so a restored model runs with its config's settings (overrides at
    ``spacy.load`` take effect)."""


class BiLMShim(PyTorchShim):
    """Thinc's PyTorch shim holding one ``BiLMRunner`` for life: weights arrive in it
    (``receive``, ``from_bytes``), so ``runner`` is always the module the shim runs, copies
    included. With them it builds the runner's token cache: ``token_cache_words`` of the words in
    ``cfg`` (saved with the weights, so a restored pipeline needs no vocabulary file)."""

    def __init__(self, runner: BiLMRunner, token_cache_words: int) -> None:
        super().__init__(
            runner, config={"cache_words": []}, device=torch_device(),
            serialize_model=_runner_to_bytes, deserialize_model=_runner_from_bytes,
        )  # fmt: skip
        self.token_cache_words = token_cache_words

    @property
    def runner(self) -> BiLMRunner:
        """The runner the shim runs: its ``_model``."""
        return self._model

    def receive(self, bilm: BiLM, cache_words: Sequence[str]) -> None:
        """Run ``bilm`` (eval mode, on Thinc's device) from now on, its token cache pre-filled
        with ``cache_words``."""
        self.runner.replace_bilm(bilm.to(torch_device()).eval())
        self.cfg = {"cache_words": list(cache_words)}
        self._build_token_cache()

    def from_bytes(self, bytes_data: bytes) -> "BiLMShim":
        super().from_bytes(bytes_data)
        self._build_token_cache()
        return self

    def _build_token_cache(self) -> None:
        n_words = self.token_cache_words
        if n_words and self.runner.bilm is not None:
            words = (self.cfg or {}).get("cache_words", [])  # a pipeline saved before they were here: none
            self.runner.cache_token_embeddings(words[:n_words], n_words)


def elmo_model(settings: ElmoModelSettings, load: WeightLoader) -> Model[List[List[str]], List[Floats3d]]:
    """The biLM model, without weights until its init (which calls ``load``), ``set_bilm`` or
    ``from_bytes``."""
    threads = resolve_threads(settings.threads)
    if threads < auto_threads():  # "auto" where the pieces cannot run on one op thread each
        warn_if_threads_compete(settings.threads, auto_threads(), torch_device())
    shim = BiLMShim(BiLMRunner(precision=settings.precision, threads=threads), settings.token_cache_words)
    return Model(
        "elmo",
        _forward,
        init=_init,
        shims=[shim],
        dims={"nO": None},
        attrs={SETTINGS: settings, LOADER: load},
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


def use_weight_loader(model: Model, load: WeightLoader) -> None:
    """The weights ``load`` names replace the model's own, read at its next init (the pipe's
    ``initialize`` with ``[initialize.components.NAME.weights]``)."""
    model.attrs[LOADER] = load
    _shim(model).runner.replace_bilm(None)


def op_threads(model: Model) -> ContextManager:
    """The span of a call that runs the model: where its runner splits batches (the CPU), the
    calling thread's ops on one thread too (``nn.threads.one_op_thread``), so that no piece
    waits at every op for threads another process keeps busy."""
    if _shim(model).runner.threads > 1 and _shim(model).device.type == "cpu":
        return one_op_thread()
    return nullcontext()


def initialized(model: Model) -> BiLMRunner:
    """The one lazy hook: the runner, the model's init run first if it never ran (its weights
    read), for the pipe's first call without ``nlp.initialize()`` and a frozen pipe's listeners."""
    if get_runner(model) is None:
        model.initialize()
    return get_runner(model)


def set_bilm(model: Model, bilm: BiLM, cache_words: Sequence[str] = ()) -> BiLMRunner:
    """Put ``bilm`` into an ``ElmoModel``: what its init does with the weights it reads."""
    _shim(model).receive(bilm, cache_words)
    model.set_dim("nO", bilm.output_dim, force=True)
    return _shim(model).runner


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


def _init(model: Model, X=None, Y=None) -> Model:
    """Thinc's init, the one place weights are read: the loader's biLM and the words that pre-fill
    the token cache (``token_cache_vocab``, else the vocabulary beside the weights), unless the
    model has weights already."""
    if get_runner(model) is None:
        source = model.attrs[LOADER]()
        settings = bilm_settings(model)
        n_words = settings.token_cache_words
        vocab = Path(settings.token_cache_vocab) if settings.token_cache_vocab else source.directory / VOCAB_NAME
        wanted = n_words and (settings.token_cache_vocab or vocab.is_file())
        set_bilm(model, load_bilm_from(source), read_cache_words(vocab, n_words) if wanted else [])
    return model


def _runner_to_bytes(runner: BiLMRunner) -> bytes:
    return bilm_to_bytes(runner.bilm)


def _runner_from_bytes(runner: BiLMRunner, data: bytes, device: torch.device) -> BiLMRunner:
    """The weights of ``data`` in the shim's own runner (see ``BiLMShim``)."""
    bilm = bilm_from_bytes(data)
    runner.replace_bilm(None if bilm is None else bilm.to(device).eval())
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
