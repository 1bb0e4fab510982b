"""Downstream components on ELMo: the listener and its task-specific layer mix.

``ElmoListener`` stands where a component's ``tok2vec`` goes (or as the ``embed`` of
``spacy.Tok2Vec.v2``). It gets every biLM layer of every doc from the ``elmo`` pipe upstream and
computes, as in the paper (eq. 1, then ``[x_k; ELMo_k]``)::

    ELMo_k = gamma * sum_j softmax(s)_j h_kj          s, gamma learned with the task
    y_k    = Maxout(width)([dropout(ELMo_k); token_embed(x)_k])

Where the layers come from:
- fine-tuning (``elmo`` pipe with ``frozen = false``, updated in the same step): the pipe sends
  them with ``receive`` and the gradients go back into the biLM;
- frozen biLM, and at prediction time: from ``doc._.elmo_layers``, which the ``elmo`` pipe wrote
  (in training, list it in ``[training] frozen_components`` and ``annotating_components``).

``nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])`` swaps a listener for an
``ElmoEmbedder``: a copy of the biLM plus the listener's own mix (``MixHead``), so the component
no longer needs the ``elmo`` pipe.
"""

from __future__ import annotations

from typing import Callable, Iterable, List, Optional, Tuple

from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d, Floats3d

from ..doc_output import decode_elmo_output


class ElmoListener(Model):
    """A layer fed with the ``elmo`` pipe's layers: ``Model[List[Doc], List[Floats2d]]``.

    Dims: ``nO`` (the explicit ``width``), and, set by the ``elmo`` pipe when it links its
    listeners, ``nL`` (biLM layers + 1) and ``nI`` (biLM width) of its ``MixHead``.
    """

    name = "elmo-listener"

    def __init__(self, upstream_name: str, head: Model) -> None:
        Model.__init__(
            self,
            name=self.name,
            forward=_listener_forward,
            init=_listener_init,
            dims={"nO": head.get_dim("nO")},
            layers=[head],
        )
        self.upstream_name = upstream_name
        #: Set by the elmo pipe that links this listener: () -> (n_layers, width), loading the
        #: biLM if needed (a frozen pipe is not initialized by ``spacy train``).
        self.upstream_dims: Optional[Callable[[], Tuple[int, int]]] = None
        #: Set by the elmo pipe that links this listener: called when the listener is initialized
        #: or trains. A frozen pipe is neither (``spacy train`` only runs it as an annotating
        #: component), so this is how it learns that training started and that its layer cache
        #: should serve the next epochs.
        self.upstream_training: Optional[Callable[[], None]] = None
        self._batch_id: Optional[int] = None
        #: The docs ``initialize`` was given: spaCy predicts on them before any elmo pipe has.
        self._init_sample: List[Doc] = []
        self._outputs: Optional[List[Floats3d]] = None
        self._backprop: Optional[Callable] = None

    @property
    def head(self) -> Model:
        return self.layers[0]

    @classmethod
    def get_batch_id(cls, docs: Iterable[Doc]) -> int:
        """A content hash of a batch, to check that the received layers belong to it."""
        return sum(sum(token.orth for token in doc) for doc in docs)

    def receive(self, batch_id: int, outputs: List[Floats3d], backprop: Callable) -> None:
        """Layers of the coming batch from a fine-tuned ``elmo`` pipe, and where their
        gradients go."""
        self._batch_id = batch_id
        self._outputs = outputs
        self._backprop = backprop

    def set_layer_dims(self, n_layers: int, width: int) -> None:
        """Called by the ``elmo`` pipe: the shape of what it will send."""
        for name, value in (("nL", n_layers), ("nI", width)):
            if self.head.has_dim(name) and self.head.get_dim(name) != value:
                raise ValueError(
                    f"ElmoListener was built for a biLM with {name}="
                    f"{self.head.get_dim(name)}, the upstream elmo pipe has {value}: the pipe's "
                    "model changed after the listening component was trained"
                )
            self.head.set_dim(name, value)


def _listener_init(model: ElmoListener, X=None, Y=None) -> ElmoListener:
    # upstream_dims is set when spaCy links an elmo pipe before this component (also for a
    # trained listener, whose dims are known: loaded with exclude=["elmo"] it has none).
    if model.upstream_dims is None:
        raise ValueError(
            "ElmoListener found no 'elmo' pipe upstream: add one before the component that "
            f"uses it (nlp.add_pipe('elmo') ...), named '{model.upstream_name}' or any name "
            "when upstream = '*'"
        )
    if not model.head.has_dim("nL"):
        model.set_layer_dims(*model.upstream_dims())
    # initialize means training follows: the pipe's layer cache starts with the first epoch.
    if model.upstream_training is not None:
        model.upstream_training()
    model.head.initialize(X=(X, None) if X is not None else None)
    # spaCy's chain initialises the next layer by predicting on the raw sample docs, which no
    # elmo pipe has seen yet (once per enclosing chain, e.g. Tok2Vec.v2 inside Tagger.v2): calls
    # on exactly these docs get zeros instead of an error, until any other call.
    model._init_sample = list(X) if X is not None else []
    return model


def _listener_forward(model: ElmoListener, docs: List[Doc], is_train: bool):
    if is_train and model.upstream_training is not None:
        model.upstream_training()
    if is_train and model._batch_id is not None:
        batch_id = model.get_batch_id(docs)
        if batch_id != model._batch_id:
            raise ValueError(
                "ElmoListener received ELMo layers for another batch: the 'elmo' pipe must be "
                "updated with the same examples right before the listening component"
            )
        layers, backprop_layers = model._outputs, model._backprop
        model._batch_id = model._outputs = model._backprop = None
    elif not is_train and _is_init_sample(model, docs) and not _all_annotated(docs):
        width = model.get_dim("nO")
        return [model.ops.alloc2f(len(doc), width) for doc in docs], lambda d: []
    else:
        layers, backprop_layers = _layers_from_docs(model, docs), None
    model._init_sample = []
    vectors, backprop_head = model.head((docs, layers), is_train)

    def backprop(d_vectors: List[Floats2d]) -> List:
        d_layers = backprop_head(d_vectors)
        if backprop_layers is not None:
            backprop_layers(d_layers)
        return []

    return vectors, backprop


def _is_init_sample(model: ElmoListener, docs: List[Doc]) -> bool:
    sample = {id(doc) for doc in model._init_sample}
    return bool(sample) and all(id(doc) in sample for doc in docs)


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
