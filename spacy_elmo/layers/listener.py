"""``ElmoListener.v1``, where a component's ``tok2vec`` goes: every biLM layer of every doc from the
``elmo`` pipe (sent when fine-tuned, else ``doc._.elmo_layers``), mixed in its head. Its state
between calls (``ListenerState``) is an attr Thinc neither saves nor copies, as
spacy-curated-transformers keeps it. docs/guide/own-data.md.
"""

from __future__ import annotations

from typing import Callable, Iterable, List, Optional

from spacy.tokens import Doc
from thinc.api import Model, deserialize_attr, serialize_attr
from thinc.types import Floats2d, Floats3d

from ..doc_output import decode_elmo_output
from .bilm_model import initialized, naming_pipe
from .mix_head import check_head, size_head

UPSTREAM = "elmo_upstream"
STATE = "elmo_listener_state"


class ListenerState:
    """What a listener holds between calls; never saved, and a copy starts empty.

    upstream: the ``ElmoModel`` of the ``elmo`` pipe that linked the listener
        (``upstream_pipe``: that pipe's name, for errors).
    batch_id, outputs, backprop: the layers a fine-tuned pipe sent for the coming batch.
    init_batch: the batch id of the docs ``initialize`` was given. spaCy's chain initialises the
        next layer by predicting on them before any elmo pipe has run: those docs get zeros
        instead of an error, until any other call."""

    def __init__(self) -> None:
        self.upstream: Optional[Model] = None
        self.upstream_pipe = ""
        self.batch_id: Optional[int] = None
        self.outputs: Optional[List[Floats3d]] = None
        self.backprop: Optional[Callable] = None
        self.init_batch: Optional[int] = None

    def __deepcopy__(self, memo) -> "ListenerState":
        return ListenerState()


@serialize_attr.register(ListenerState)
def _serialize_state(_, value: ListenerState, name: str, model: Model) -> bytes:
    return b""


@deserialize_attr.register(ListenerState)
def _deserialize_state(_, value: bytes, name: str, model: Model) -> ListenerState:
    return ListenerState()


def elmo_listener(upstream_name: str, head: Model) -> Model[List[Doc], List[Floats2d]]:
    """``Model[List[Doc], List[Floats2d]]`` fed with the pipe's layers through its ``head``; dims
    ``nO`` (width), and once the biLM is known the head's ``nL`` and ``nI``."""
    return Model(
        "elmo-listener",
        _listener_forward,
        init=_listener_init,
        dims={"nO": head.get_dim("nO")},
        layers=[head],
        attrs={UPSTREAM: upstream_name, STATE: ListenerState()},
    )


def is_listener(model: Model) -> bool:
    return STATE in model.attrs


def upstream_name(listener: Model) -> str:
    return listener.attrs[UPSTREAM]


def listener_head(listener: Model) -> Model:
    return listener.layers[0]


def batch_id(docs: Iterable[Doc]) -> int:
    """A content hash of a batch, to check that the received layers belong to it."""
    return sum(sum(token.orth for token in doc) for doc in docs)


def link(listener: Model, upstream: Model, pipe_name: str) -> None:
    """Called by the ``elmo`` pipe feeding ``listener``: its biLM model, for the layer dims."""
    state = _state(listener)
    state.upstream, state.upstream_pipe = upstream, pipe_name


def unlink(listener: Model) -> None:
    state = _state(listener)
    state.upstream, state.upstream_pipe = None, ""


def receive(listener: Model, batch: int, outputs: List[Floats3d], backprop: Callable) -> None:
    """Layers of the coming batch from a fine-tuned ``elmo`` pipe, and where their gradients go."""
    state = _state(listener)
    state.batch_id, state.outputs, state.backprop = batch, outputs, backprop


def _state(listener: Model) -> ListenerState:
    return listener.attrs[STATE]


def _listener_init(model: Model, X=None, Y=None) -> Model:
    state = _state(model)
    # Linked when spaCy links the components of a pipeline with an elmo pipe before this one
    # (also for a trained listener, whose dims are known: loaded with exclude=["elmo"] it is not).
    if state.upstream is None:
        raise ValueError(
            "ElmoListener found no 'elmo' pipe upstream: add one before the component that "
            f"uses it (nlp.add_pipe('elmo') ...), named '{upstream_name(model)}' or any name "
            "when upstream = '*'"
        )
    head = listener_head(model)
    # A frozen pipe's biLM has no weights yet (spacy train does not initialize it): the lazy hook.
    with naming_pipe(state.upstream_pipe):
        bilm = initialized(state.upstream).bilm
    size_head(head, bilm.n_output_layers, bilm.output_dim)
    head.initialize(X=(X, None) if X is not None else None)
    state.init_batch = batch_id(X) if X is not None else None
    return model


def _listener_forward(model: Model, docs: List[Doc], is_train: bool):
    state = _state(model)
    if is_train and state.batch_id is not None:
        if batch_id(docs) != state.batch_id:
            raise ValueError(
                "ElmoListener received ELMo layers for another batch: the 'elmo' pipe must be "
                "updated with the same examples right before the listening component"
            )
        layers, backprop_layers = state.outputs, state.backprop
        state.batch_id = state.outputs = state.backprop = None
    elif not is_train and state.init_batch is not None and state.init_batch == batch_id(docs) and not _all_annotated(docs):
        width = model.get_dim("nO")
        return [model.ops.alloc2f(len(doc), width) for doc in docs], lambda d: []
    else:
        layers, backprop_layers = _layers_from_docs(model, docs), None
    state.init_batch = None
    if layers:
        check_head(listener_head(model), layers[0].shape[0], layers[0].shape[2])
    vectors, backprop_head = listener_head(model)((docs, layers), is_train)

    def backprop(d_vectors: List[Floats2d]) -> List:
        d_layers = backprop_head(d_vectors)
        if backprop_layers is not None:
            backprop_layers(d_layers)
        return []

    return vectors, backprop


def _all_annotated(docs: List[Doc]) -> bool:
    return Doc.has_extension("elmo_output") and all(doc._.elmo_output is not None for doc in docs)


def _layers_from_docs(model: Model, docs: List[Doc]) -> List[Floats3d]:
    layers = []
    for doc in docs:
        output = doc._.elmo_output if Doc.has_extension("elmo_output") else None
        if output is None:
            raise ValueError(
                "ElmoListener: a doc has no ELMo layers. Put an 'elmo' pipe before the listening "
                "component; when training with a frozen elmo pipe, list it in [training] "
                "frozen_components and annotating_components so its output is on the docs"
            )
        if isinstance(output, dict):  # decoded from bytes before the pipe module was imported
            output = doc._.elmo_output = decode_elmo_output(output)
        if output.layers is None:
            raise ValueError(
                "ElmoListener needs every biLM layer, but the elmo pipe was configured with "
                "store_layers = false"
            )
        layers.append(model.ops.asarray3f(output.layers))
    return layers
