"""Every trainable spaCy component on a frozen ELMo biLM through ``spacy_elmo.ElmoListener.v1``:
trained the way ``spacy train`` trains it (the ``elmo`` pipe frozen and annotating), saved,
reloaded, predicting the same; the layer cache serves the epochs after the first.

The tagger and the NER have their own tests (test_listener.py, the project's demo); these are the
others: text classification (exclusive and multi-label), dependency parsing, morphology, sentence
boundaries and span categorisation. The biLM is the tiny AllenNLP test fixture.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List

import numpy as np
import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from thinc.api import Adam, fix_random_seed

from conftest import ELMO_FIXTURE
from spacy_elmo.layers.listener import is_listener, listener_head

ELMO = {
    "model": {
        "options_file": str(ELMO_FIXTURE / "options.json"),
        "weight_file": str(ELMO_FIXTURE / "lm_weights.hdf5"),
    },
    "frozen": True,
    "cache_size_mb": 8,
}
LISTENER = {"@architectures": "spacy_elmo.ElmoListener.v1", "width": 16, "upstream": "elmo"}

#: Four annotated sentences: every component below learns from its own part of them.
SENTENCES = [
    {
        "words": ["I", "loved", "this", "film", "."],
        "heads": [1, 1, 3, 1, 1],
        "deps": ["nsubj", "ROOT", "det", "obj", "punct"],
        "pos": ["PRON", "VERB", "DET", "NOUN", "PUNCT"],
        "morphs": ["Case=Nom", "Tense=Past", "", "Number=Sing", ""],
        "cats": {"positive": 1.0, "negative": 0.0, "about film": 1.0},
        "spans": [(3, 4, "THING")],
    },
    {
        "words": ["They", "hated", "the", "long", "books", "."],
        "heads": [1, 1, 4, 4, 1, 1],
        "deps": ["nsubj", "ROOT", "det", "amod", "obj", "punct"],
        "pos": ["PRON", "VERB", "DET", "ADJ", "NOUN", "PUNCT"],
        "morphs": ["Case=Nom", "Tense=Past", "", "", "Number=Plur", ""],
        "cats": {"positive": 0.0, "negative": 1.0, "about film": 0.0},
        "spans": [(3, 5, "THING")],
    },
    {
        "words": ["We", "like", "films", "."],
        "heads": [1, 1, 1, 1],
        "deps": ["nsubj", "ROOT", "obj", "punct"],
        "pos": ["PRON", "VERB", "NOUN", "PUNCT"],
        "morphs": ["Case=Nom", "Tense=Pres", "Number=Plur", ""],
        "cats": {"positive": 1.0, "negative": 0.0, "about film": 1.0},
        "spans": [(2, 3, "THING")],
    },
    {
        "words": ["She", "disliked", "a", "book", "."],
        "heads": [1, 1, 3, 1, 1],
        "deps": ["nsubj", "ROOT", "det", "obj", "punct"],
        "pos": ["PRON", "VERB", "DET", "NOUN", "PUNCT"],
        "morphs": ["Case=Nom", "Tense=Past", "", "Number=Sing", ""],
        "cats": {"positive": 0.0, "negative": 1.0, "about film": 0.0},
        "spans": [(3, 4, "THING")],
    },
]


def tok2vec() -> Dict[str, Any]:
    """The project's layout: the listener as the embed of spacy.Tok2Vec.v2, a CNN on top."""
    return {
        "@architectures": "spacy.Tok2Vec.v2",
        "embed": dict(LISTENER),
        "encode": {
            "@architectures": "spacy.MaxoutWindowEncoder.v2",
            "width": 16, "depth": 1, "window_size": 1, "maxout_pieces": 2,
        },
    }  # fmt: skip


def tagger_model() -> Dict[str, Any]:
    return {"@architectures": "spacy.Tagger.v2", "tok2vec": tok2vec()}


#: factory -> (its config, the annotations of SENTENCES it learns, what it predicts on a doc).
COMPONENTS: Dict[str, Any] = {
    "textcat": (
        # The project's SST-5 classifier: exclusive classes, attention pooling.
        {"model": {"@architectures": "spacy.TextCatParametricAttention.v1", "exclusive_classes": True, "tok2vec": tok2vec()}},
        lambda s: {"cats": {k: v for k, v in s["cats"].items() if k != "about film"}},
        lambda doc: max(doc.cats, key=doc.cats.get),
    ),
    "textcat_multilabel": (
        {"model": {
            "@architectures": "spacy.TextCatReduce.v1", "exclusive_classes": False, "tok2vec": tok2vec(),
            "use_reduce_first": False, "use_reduce_last": False, "use_reduce_max": True, "use_reduce_mean": True,
        }},
        lambda s: {"cats": s["cats"]},
        lambda doc: sorted(label for label, p in doc.cats.items() if p >= 0.5),
    ),
    "parser": (
        {"model": {
            "@architectures": "spacy.TransitionBasedParser.v2", "state_type": "parser", "extra_state_tokens": False,
            "hidden_width": 16, "maxout_pieces": 2, "use_upper": True, "tok2vec": tok2vec(),
        }, "min_action_freq": 1},
        lambda s: {"heads": s["heads"], "deps": s["deps"]},
        lambda doc: [(t.head.i, t.dep_) for t in doc],
    ),
    "morphologizer": (
        {"model": tagger_model()},
        lambda s: {"pos": s["pos"], "morphs": s["morphs"]},
        lambda doc: [(t.pos_, str(t.morph)) for t in doc],
    ),
    "senter": (
        {"model": tagger_model()},
        lambda s: {"sent_starts": [1] + [0] * (len(s["words"]) - 1)},
        lambda doc: [t.is_sent_start for t in doc],
    ),
    "spancat": (
        {
            "spans_key": "sc",
            "suggester": {"@misc": "spacy.ngram_suggester.v1", "sizes": [1, 2]},
            "model": {
                "@architectures": "spacy.SpanCategorizer.v1",
                "tok2vec": tok2vec(),
                "reducer": {"@layers": "spacy.mean_max_reducer.v1", "hidden_size": 16},
                "scorer": {"@layers": "spacy.LinearLogistic.v1"},
            },
        },
        lambda s: {"spans": {"sc": s["spans"]}},
        lambda doc: [(sp.start, sp.end, sp.label_) for sp in doc.spans["sc"]],
    ),
}


def pipeline(factory: str) -> Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config=ELMO)
    nlp.add_pipe(factory, config=COMPONENTS[factory][0])
    return nlp


def examples(nlp: Language, factory: str) -> List[Example]:
    """Fresh examples, as spaCy's corpus reader gives them every epoch: new predicted docs."""
    annotations = COMPONENTS[factory][1]
    result = []
    for sentence in SENTENCES:
        words = sentence["words"]
        predicted = Doc(nlp.vocab, words=words)
        annotation = annotations(sentence)
        if "spans" in annotation:  # token offsets -> character offsets
            spans = []
            for start, end, label in annotation["spans"]["sc"]:
                span = predicted[start:end]
                spans.append((span.start_char, span.end_char, label))
            annotation = {"spans": {"sc": spans}}
        result.append(Example.from_dict(predicted, annotation))
    return result


def train_as_spacy_train(nlp: Language, factory: str, epochs: int) -> List[tuple]:
    """``spacy train`` with ``frozen_components = annotating_components = ["elmo"]``: the elmo
    pipe is neither initialized nor updated, it annotates each batch before the component learns.
    Two batches an epoch. Returns the cache's (hits, misses) after each epoch."""
    fix_random_seed(0)
    with nlp.select_pipes(disable=["elmo"]):
        optimizer = nlp.initialize(lambda: examples(nlp, factory), sgd=Adam(0.01))
    cache = nlp.get_pipe("elmo").cache
    counts = []
    for _ in range(epochs):
        batch = examples(nlp, factory)
        for half in (batch[:2], batch[2:]):
            losses: Dict[str, float] = {}
            nlp.update(half, sgd=optimizer, losses=losses, exclude=["elmo"], annotates=["elmo"])
            assert "elmo" not in losses and losses[factory] >= 0.0
        counts.append((cache.hits, cache.misses))
    return counts


TEXTS = ["They loved the long film .", "I hated books ."]


def predictions(nlp: Language, factory: str, get: Callable) -> list:
    return [get(doc) for doc in nlp.pipe(TEXTS)]


def scores(nlp: Language, factory: str) -> list:
    """The component's raw output on TEXTS (class probabilities, tag scores, span scores...)."""
    pipe = nlp.get_pipe(factory)
    docs = list(nlp.get_pipe("elmo").pipe(nlp.make_doc(text) for text in TEXTS))
    output = pipe.predict(docs)
    if factory == "spancat":
        return [np.asarray(output[1])]  # (spans, scores): the scores of the suggested spans
    if factory == "parser":
        return []  # parse states, not arrays: predictions() compares the trees
    return [np.asarray(x) for x in (output if isinstance(output, list) else [output])]


@pytest.mark.parametrize("factory", list(COMPONENTS))
def test_component_trains_on_elmo_saves_reloads_and_predicts_the_same(factory, tmp_path):
    nlp = pipeline(factory)
    counts = train_as_spacy_train(nlp, factory, epochs=8)
    # The layer cache: epoch 1 computes every sentence's layers, later epochs only look them up.
    n = len(SENTENCES)
    assert counts[0] == (0, n), counts
    assert all(hits == n * (epoch) and misses == n for epoch, (hits, misses) in enumerate(counts)), counts
    listener = next(n for n in nlp.get_pipe(factory).model.walk() if is_listener(n))
    assert not np.allclose(listener_head(listener).get_param("s"), 0.0), "the task's layer mix is learned"

    get = COMPONENTS[factory][2]
    expected, expected_scores = predictions(nlp, factory, get), scores(nlp, factory)
    nlp.to_disk(tmp_path / factory)
    loaded = spacy.load(tmp_path / factory)
    assert loaded.pipe_names == ["elmo", factory]
    assert predictions(loaded, factory, get) == expected
    for a, b in zip(scores(loaded, factory), expected_scores):
        np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("factory", ["textcat", "parser"])
def test_component_learns_its_training_data(factory):
    """Not just a round trip: the classifier and the parser fit the four sentences."""
    nlp = pipeline(factory)
    train_as_spacy_train(nlp, factory, epochs=40)
    docs = list(nlp.pipe(" ".join(s["words"]) for s in SENTENCES))
    if factory == "textcat":
        labels = [max(doc.cats, key=doc.cats.get) for doc in docs]
        assert labels == [max(("positive", "negative"), key=s["cats"].get) for s in SENTENCES]
    else:
        correct = sum(t.head.i == h for doc, s in zip(docs, SENTENCES) for t, h in zip(doc, s["heads"]))
        assert correct / sum(len(s["words"]) for s in SENTENCES) >= 0.9
