"""The ``elmo`` pipe: contextual ELMo vectors on every Doc, Span and Token.

The biLM and what it needs to run live in the model block (``ElmoModel.v2``); the pipe keeps what it
writes: ``doc.tensor`` (which spaCy's ``.vector`` reads without hooks, so it survives bytes and
``n_process``), ``doc._.elmo_output``, the getters and, in memory, the vector hooks. docs/reference/config.md and
docs/design.md.
"""

from __future__ import annotations

import multiprocessing
from typing import Annotated, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union

import numpy as np
import torch
from pydantic import AfterValidator, Field
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.pipeline.tok2vec import Tok2Vec, Tok2VecListener
from spacy.tokens import Doc, Span, Token
from spacy.training import Example
from spacy.vocab import Vocab
from thinc.api import Config, Model, Optimizer, torch2xp, xp2torch

from . import architectures, loaders  # noqa: F401  (register the architectures and spacy_elmo.WeightLoader.v2)
from .batching import batch_by_length
from .doc_output import ElmoOutput, decode_elmo_output
from .layers import listener as listeners
from .layers.bilm_model import (
    ElmoModelSettings,
    bilm_settings,
    get_runner,
    naming_pipe,
    op_threads,
    torch_device,
    use_weight_loader,
)
from .layers.doc_layers import LayerCache, doc_layers, split_sequences
from .nn.bilm import BiLM
from .nn.runner import BiLMRunner
from .nn.scalar_mix import default_mix_weights, weighted_sum
from .nn.threads import prepare_forked_children
from .validation import FiniteNumber, NonNegativeNumber, StrictNonNegative, checked_arguments

__all__ = ["Elmo", "add_vector_hooks", "batch_by_length", "make_elmo", "split_sequences"]

DEFAULT_CONFIG_STR = """
[elmo]
# Scalar mix for doc._.elmo, token.vector and similarity: one non-negative weight per biLM
# layer (token layer first), divided by their sum. null = the LSTM layers equally, without the
# context-free token layer (its word-sense margin is 1.5 times that of [1, 1, 1]: see
# docs/results/senses.md). Listeners learn their own mix. The mix is scaled by gamma.
mix_weights = null
gamma = 1.0
# Keep every layer in doc._.elmo_layers (n_layers + 1 times the memory of doc._.elmo).
store_layers = true
# Also set vector hooks (in memory only: spaCy does not serialise them): ELMo .vector with
# static vectors in the vocab, and .similarity() of same-text tokens. doc.tensor always holds
# the vectors.
set_vector_hooks = true
# true: the biLM is never updated (listeners learn their own mix on top of it). false: update()
# fine-tunes the biLM with the gradients of the listening components.
frozen = true
# Frozen biLM only: keep the layers of up to this many MB of sentences, keyed on their words
# (least recently used out), and look every sentence up there first, so that training epochs
# after the first skip the biLM. 0: off (inference over new text gains nothing from it).
cache_size_mb = 0

[elmo.model]
@architectures = "spacy_elmo.ElmoModel.v2"
# Which weights: a released or downloaded model's name ("small"; python -m spacy_elmo download
# NAME), a model directory, or options_file + weight_file; all null: the bundled English model.
weights = null
options_file = null
weight_file = null
# "fp32" (exact on the CPU), "int8" (CPU: int8 weights, fastest), "bf16"/"fp16" (autocast).
# Not exact: see docs/results/cpu-speed.md and gpu-speed.md for the measured deviation of each.
precision = "fp32"
# Longest biLM sequence; longer sentences, and docs without sentence boundaries, are cut.
max_sequence_length = 256
# Padded tokens (sequences x longest sequence) per biLM call.
max_batch_tokens = 4096
# Threads the biLM's inference splits each batch over: its forward and backward LSTMs side by
# side (and with 4+, shards of the batch), so that a busy machine does not stall them. "auto":
# the usable cores, at most 2, where PyTorch runs its ops on one thread (torch.set_num_threads(1)
# once in your program), else 1. See docs/guide/using.md, "One PyTorch op thread".
threads = "auto"
# Keep the token vectors of up to this many words the pipe has seen (least recently used out;
# never where gradients flow): they skip the character CNN. 0: off. token_cache_vocab: a word
# list (one a line) that pre-fills it.
token_cache_words = 0
token_cache_vocab = null
"""
DEFAULT_CONFIG = Config().from_str(DEFAULT_CONFIG_STR)


def _positive_sum(weights: List[float]) -> List[float]:
    if sum(weights) <= 0:
        raise ValueError("must have a positive sum (or be null: the LSTM layers equally, no token layer)")
    return weights


#: One non-negative weight per biLM layer, token layer first (divided by their sum).
MixWeights = Annotated[List[NonNegativeNumber], Field(min_length=1), AfterValidator(_positive_sum)]


@Language.factory(
    "elmo",
    default_config=DEFAULT_CONFIG["elmo"],
    assigns=["doc._.elmo_output", "doc._.elmo", "doc._.elmo_layers", "token._.elmo", "span._.elmo"],
)
@checked_arguments("elmo pipe")
def make_elmo(
    nlp: Language,
    name: str,
    model: Model[List[List[str]], List[np.ndarray]],
    mix_weights: Optional[MixWeights],
    gamma: FiniteNumber,
    store_layers: bool,
    set_vector_hooks: bool,
    frozen: bool,
    cache_size_mb: StrictNonNegative,
) -> "Elmo":
    """The ``elmo`` pipe; reads no weights (``spacy.load`` fills one from disk next)."""
    others = [other for other, pipe in nlp.pipeline if isinstance(pipe, Elmo)]
    if others:
        raise ValueError(
            f"elmo pipe '{name}': the pipeline already has an elmo pipe ('{others[0]}'). Its "
            "outputs (doc._.elmo, doc._.elmo_layers, doc.tensor) hold one biLM's vectors per doc, "
            "so a second pipe would overwrite them under the first one's listeners; keep one elmo "
            "pipe (nlp.replace_listeners gives a component its own copy of the biLM)"
        )
    return Elmo(
        nlp.vocab,
        model,
        name,
        mix_weights=mix_weights,
        gamma=gamma,
        store_layers=store_layers,
        set_vector_hooks=set_vector_hooks,
        frozen=frozen,
        cache_size_mb=cache_size_mb,
    )


class Elmo(TrainablePipe):
    """Runs an ELMo biLM over docs and stores its vectors on them; a pipe restored with
    ``from_disk``/``from_bytes`` never reads the configured files."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "elmo",
        *,
        mix_weights: Optional[Sequence[float]] = None,
        gamma: float = 1.0,
        store_layers: bool = True,
        set_vector_hooks: bool = True,
        frozen: bool = True,
        cache_size_mb: int = 0,
    ) -> None:
        self.vocab = vocab
        self.model = model
        self.name = name
        self.cfg: Dict = {}
        prepare_forked_children()  # spaCy's nlp.pipe(n_process=N) forks to run the pipe
        self.mix_weights, self.gamma = mix_weights, gamma
        self.store_layers = store_layers
        self.set_vector_hooks = set_vector_hooks
        self.frozen = frozen
        #: On for the pipe's life when set (and the biLM is frozen): every call looks up its
        #: sentences first, training epochs and inference alike.
        self.cache = LayerCache(cache_size_mb * 2**20) if cache_size_mb and frozen else None
        self.listener_map: Dict[str, List[Model]] = {}

    @property
    def settings(self) -> ElmoModelSettings:
        """The biLM's runtime settings (the model block)."""
        return bilm_settings(self.model)

    @property
    def runner(self) -> BiLMRunner:
        """What runs the biLM (``nn/runner.py``); reads nothing: its weights arrive at
        ``initialize``, or at the pipe's first call without it."""
        runner = get_runner(self.model)
        if runner is None:
            raise ValueError(f"elmo pipe '{self.name}' has no weights yet: nlp.initialize() reads them, as does its first doc")
        return runner

    @property
    def bilm(self) -> BiLM:
        return self.runner.bilm

    def initialize(
        self,
        get_examples: Optional[Callable[[], Iterable[Example]]] = None,
        *,
        nlp=None,
        weights: Optional[Callable] = None,  # () -> WeightSource (spaCy validates this signature)
    ) -> None:
        """Read the weights (the model's init) and check the mix weights against the layers.

        ``weights``: a weight loader (``spacy_elmo.WeightLoader.v2``) whose weights replace the
        model's; without it the model's init reads the configured ones, unless the model has weights
        already. ``nlp``: the pipeline, checked for components after this pipe that read
        ``doc.tensor``."""
        if nlp is not None:
            self._check_no_tensor_reader_after(nlp)
        if weights is not None:
            use_weight_loader(self.model, weights)
        with naming_pipe(self.name):
            self.model.initialize()
        self.layer_weights()

    def layer_weights(self) -> np.ndarray:
        """The normalised mix weights w_j, (n_layers + 1,) float32; the default leaves out the token
        layer (``nn.scalar_mix.default_mix_weights`` says why)."""
        n_layers = self.bilm.n_output_layers
        if self.mix_weights is None:
            return default_mix_weights(n_layers)
        if len(self.mix_weights) != n_layers:
            raise ValueError(
                f"elmo pipe '{self.name}': mix_weights has {len(self.mix_weights)} weights, the "
                f"model has {n_layers} layers (the token layer and {n_layers - 1} LSTM layers)"
            )
        weights = np.asarray(self.mix_weights, dtype=np.float64)
        return (weights / weights.sum()).astype(np.float32)

    def _check_no_tensor_reader_after(self, nlp: Language) -> None:
        """A tok2vec listener after this pipe would read its ``doc.tensor`` at inference instead of
        its tok2vec's (a shape error, or silent garbage)."""
        names = nlp.pipe_names
        if self.name not in names:
            return
        for name in names[names.index(self.name) + 1 :]:
            model = getattr(nlp.get_pipe(name), "model", None)
            if isinstance(model, Model) and any(isinstance(node, Tok2VecListener) for node in model.walk()):
                raise ValueError(
                    f"elmo pipe '{self.name}' comes before '{name}', whose tok2vec listener reads "
                    f"doc.tensor at inference, and the elmo pipe writes its vectors there: put "
                    f"'{self.name}' after '{name}' (nlp.add_pipe(\"elmo\") appends it last)"
                )

    # ------------------------------------------------------------------ listeners
    # spaCy's Tok2Vec keeps the listener map; the elmo pipe also links each listener to its model.
    listeners = Tok2Vec.listeners
    listening_components = Tok2Vec.listening_components

    def add_listener(self, listener: Model, component_name: str) -> None:
        """Register a downstream listener and link it to this pipe's biLM model."""
        Tok2Vec.add_listener(self, listener, component_name)
        listeners.link(listener, self.model, self.name)

    def remove_listener(self, listener: Model, component_name: str) -> bool:
        removed = Tok2Vec.remove_listener(self, listener, component_name)
        if removed:
            listeners.unlink(listener)
        return removed

    def find_listeners(self, component) -> None:
        """Register the ElmoListener layers of ``component`` whose upstream is this pipe."""
        names = ("*", self.name)
        if isinstance(getattr(component, "model", None), Model):
            for node in component.model.walk():
                if listeners.is_listener(node) and listeners.upstream_name(node) in names:
                    self.add_listener(node, component.name)

    # ------------------------------------------------------------------ processing
    # __call__ and pipe are TrainablePipe's (predict, then set_annotations, under the error
    # handler; pipe in groups of batch_size): within a group, predict batches sequences by length.
    def predict(self, docs: Iterable[Doc]) -> List[ElmoOutput]:
        """The ELMo output of each doc (CPU arrays), without modifying the docs."""
        docs = list(docs)
        with op_threads(self.model):
            layers, _ = self._run_bilm(docs, is_train=False)
            return self._outputs(layers)

    def _run_bilm(self, docs: List[Doc], is_train: bool):
        """Per-doc ``(n_layers + 1, len(doc), width)`` layers and their backprop; the model's
        weights read first if it has none (errors naming the pipe)."""
        with naming_pipe(self.name):
            return doc_layers(self.model, docs, cache=self.cache, is_train=is_train)

    def _outputs(self, layers: List) -> List[ElmoOutput]:
        """Per-doc layers (model device) -> ElmoOutput with the fixed mix, on the CPU."""
        ops = self.model.ops
        weights = self.layer_weights()
        width = self.model.get_dim("nO")
        scale = xp2torch(ops.asarray1f(weights * self.gamma))
        with torch.no_grad():
            mixed = [torch2xp(weighted_sum(xp2torch(x), scale)) for x in layers]
        return [
            ElmoOutput(
                width,
                ops.to_numpy(vectors).astype(np.float32, copy=False),
                ops.to_numpy(per_doc) if self.store_layers else None,
                weights,
                self.gamma,
            )
            for vectors, per_doc in zip(mixed, layers)
        ]

    def set_annotations(self, docs: Iterable[Doc], outputs: List[ElmoOutput]) -> None:
        """``doc.tensor``, ``doc._.elmo_output`` and the hooks; no hooks in a multiprocessing
        worker, whose docs go back as bytes (which drop them, W109)."""
        hooks = self.set_vector_hooks and multiprocessing.parent_process() is None
        for doc, output in zip(docs, outputs):
            doc._.elmo_output = output
            doc.tensor = output.vectors
            if hooks:
                add_vector_hooks(doc)

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Annotate the predicted docs for later components; not frozen, the layers go to the
        listeners (``receive``) and ``sgd`` updates the biLM after the last one's backprop."""
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        docs = [eg.predicted for eg in examples]
        if self.frozen or not self.listeners:
            self.set_annotations(docs, self.predict(docs))
            return losses
        layers, backprop_layers = self._run_bilm(docs, is_train=True)
        self.set_annotations(docs, self._outputs(layers))
        ops = self.model.ops
        d_layers = [ops.alloc3f(*x.shape) for x in layers]

        def accumulate_gradient(one_d_layers: List) -> List:
            for total, d in zip(d_layers, one_d_layers):
                total += d
                losses[self.name] += float((d**2).sum())
            return []

        def backprop(one_d_layers: List) -> List:
            accumulate_gradient(one_d_layers)
            backprop_layers(d_layers)
            if sgd is not None:
                self.finish_update(sgd)
            return []

        batch = listeners.batch_id(docs)
        for listener in self.listeners[:-1]:
            listeners.receive(listener, batch, layers, accumulate_gradient)
        listeners.receive(self.listeners[-1], batch, layers, backprop)
        return losses

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        if "model" not in exclude:
            self._check_weights_to_save()
        return super().to_bytes(exclude=exclude)

    def to_disk(self, path, *, exclude=tuple()) -> None:
        if "model" not in exclude:
            self._check_weights_to_save()
        super().to_disk(path, exclude=exclude)

    def _check_weights_to_save(self) -> None:
        """Saved weights, never a saved promise to read the configured files later."""
        if get_runner(self.model) is None:
            raise ValueError(
                f"elmo pipe '{self.name}' has no weights to save yet: call nlp.initialize() first "
                "(it reads the weights the model block names), or run the pipeline on a text"
            )

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "Elmo":
        torch_device()  # a clear error before Thinc asks CUDA for a device it cannot see
        return super().from_bytes(bytes_data, exclude=exclude)

    def from_disk(self, path, *, exclude=tuple()) -> "Elmo":
        torch_device()
        try:
            super().from_disk(path, exclude=exclude)
        except (ValueError, OSError, KeyError) as err:  # a cut or damaged file of the saved pipe
            raise unreadable_saved_pipe(self.name, path, err) from err
        return self


def unreadable_saved_pipe(name: str, directory, err: Exception) -> ValueError:
    """The error for a saved elmo pipe that ``from_disk`` could not read: which of its files
    (``cfg``, ``model``) is damaged, its size, and what to do; the reader's own message last."""
    from pathlib import Path

    import srsly

    directory = Path(directory)
    damaged = None
    for file_name, parse in (("cfg", srsly.read_json), ("model", lambda f: srsly.msgpack_loads(f.read_bytes()))):
        file = directory / file_name
        try:
            parse(file)
        except Exception:  # any reader's error: this is the file
            damaged = file
            break
    what = (
        f"{damaged} ({damaged.stat().st_size:,} bytes) is not whole" if damaged is not None and damaged.exists()
        else f"{damaged} is missing" if damaged is not None
        else f"its files in {directory} do not load"
    )
    return ValueError(
        f"elmo pipe '{name}' of the saved pipeline: {what}, so the pipeline cannot be loaded: it was "
        "cut short or damaged (an interrupted copy or download, a full disk). Copy the pipeline "
        f"folder again, or save it again with nlp.to_disk(). ({type(err).__name__}: {err})"
    )


# Extensions and vector hooks: module-level functions, so that docs with hooks still pickle.


def install_extensions() -> None:
    """Register the ``._.elmo*`` attributes (idempotent)."""
    Doc.set_extension("elmo_output", default=None, force=True)
    Doc.set_extension("elmo", getter=_get_elmo_vectors, force=True)
    Doc.set_extension("elmo_layers", getter=_get_elmo_layers, force=True)
    Token.set_extension("elmo", getter=token_vector, force=True)
    Span.set_extension("elmo", getter=span_vector, force=True)


def restore(docs: Union[Doc, Iterable[Doc]]) -> Union[Doc, Iterator[Doc]]:
    """Give docs that went through bytes their ELMo ``.vector`` and contextual ``.similarity()``
    back: one doc, or lazily each doc of a stream (``nlp.pipe(texts, n_process=2)``,
    ``DocBin.get_docs``); ``add_vector_hooks`` on each. Exported as ``spacy_elmo.restore``; the
    docs/guide/using.md says when it is needed."""
    if isinstance(docs, Doc):
        return add_vector_hooks(docs)
    return _restore_each(docs)


def _restore_each(docs: Iterable[Doc]) -> Iterator[Doc]:
    for number, doc in enumerate(docs):
        try:
            yield add_vector_hooks(doc)
        except ValueError as err:
            raise ValueError(f"restore: doc {number} of the stream ({doc.text[:40]!r}): {err}") from None


def add_vector_hooks(doc: Doc) -> Doc:
    """ELMo ``.vector``, ``.has_vector``, ``.similarity()`` for the doc; refills ``doc.tensor``."""
    if _output(doc) is None:
        raise ValueError(
            "the doc has no ELMo output: run the elmo pipe on it first; a DocBin keeps the output "
            "only when it is saved with DocBin(store_user_data=True)"
        )
    vectors = _get_elmo_vectors(doc)
    if vectors is None:
        raise ValueError(
            "the doc has no ELMo vectors: it comes from a DocBin (which keeps no doc.tensor) of "
            "docs made with store_layers = false (so the layers to recompute them from are not "
            "stored either); keep store_layers = true, or save docs with doc.to_bytes()"
        )
    if doc.tensor.size == 0 and len(doc):
        doc.tensor = vectors
    doc.user_hooks.update(
        {"vector": doc_vector, "vector_norm": _norm, "has_vector": _has_vector, "similarity": similarity}
    )
    # No span "vector_norm" hook: spaCy 3 answers it with the span's "vector" hook.
    doc.user_span_hooks.update({"vector": span_vector, "has_vector": _has_vector, "similarity": similarity})
    doc.user_token_hooks.update(
        {"vector": token_vector, "has_vector": _token_has_vector, "similarity": similarity}
    )
    return doc


def _output(doc: Doc) -> Optional[ElmoOutput]:
    output = doc._.elmo_output
    if isinstance(output, dict):  # bytes decoded before spacy_elmo was imported
        output = doc._.elmo_output = decode_elmo_output(output)
    return output


def _get_elmo_vectors(doc: Doc) -> Optional[np.ndarray]:
    output = _output(doc)
    return None if output is None else output.vectors_for(doc.tensor, len(doc))


def _get_elmo_layers(doc: Doc) -> Optional[np.ndarray]:
    output = _output(doc)
    return None if output is None else output.layers


def token_vector(token: Token) -> Optional[np.ndarray]:
    """``doc._.elmo[token.i]``, shape (width,)."""
    vectors = _get_elmo_vectors(token.doc)
    return None if vectors is None else vectors[token.i]


def span_vector(span: Span) -> Optional[np.ndarray]:
    """Mean of the span's rows of ``doc._.elmo`` (zeros for an empty span), shape (width,)."""
    vectors = _get_elmo_vectors(span.doc)
    if vectors is None:
        return None
    if len(span) == 0:
        return np.zeros(vectors.shape[1], dtype=np.float32)
    return vectors[span.start : span.end].mean(axis=0)


def doc_vector(doc: Doc) -> Optional[np.ndarray]:
    return span_vector(doc[:])


def similarity(obj: Union[Doc, Span, Token], other) -> float:
    """Cosine of the two objects' vectors (0.0 when one of them is all zeros)."""
    a, b = obj.vector, other.vector
    if a.shape != b.shape:
        raise ValueError(
            f"cannot compare the ELMo vector of {obj!r} (shape {a.shape}) with the vector of "
            f"{other!r} (shape {b.shape}): both need ELMo vectors of the same model"
        )
    norm = float(np.linalg.norm(a)) * float(np.linalg.norm(b))
    return float(np.dot(a, b) / norm) if norm else 0.0


def _norm(obj) -> float:
    return float(np.linalg.norm(obj.vector))


def _token_has_vector(token: Token) -> bool:
    """Whitespace tokens are not read by the biLM: they have no vector."""
    return not token.text.isspace()


def _has_vector(obj: Union[Doc, Span]) -> bool:
    return any(_token_has_vector(token) for token in obj)


install_extensions()
