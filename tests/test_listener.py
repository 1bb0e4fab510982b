"""Downstream components on ELMo: the listener, its mix, frozen vs fine-tuned biLM, the cache."""

from __future__ import annotations

import numpy as np
import pytest
import spacy
import torch
from spacy.training import Example
from thinc.api import Adam, Model, fix_random_seed

from conftest import ELMO_FIXTURE
from spacy_elmo.layers.bilm_model import bilm_settings
from spacy_elmo.layers.doc_layers import LayerCache
from spacy_elmo.layers.mix_head import mix_head

ELMO = {
    "model": {
        "options_file": str(ELMO_FIXTURE / "options.json"),
        "weight_file": str(ELMO_FIXTURE / "lm_weights.hdf5"),
    }
}
LISTENER = {"@architectures": "spacy_elmo.ElmoListener.v1", "width": 24, "dropout": 0.1}
TOKEN_EMBED = {
    "@architectures": "spacy.MultiHashEmbed.v2",
    "width": 16,
    "attrs": ["NORM", "SHAPE"],
    "rows": [500, 50],
    "include_static_vectors": False,
}
DATA = [
    ("I like green eggs", ["N", "V", "J", "N"]),
    ("Eat blue ham", ["V", "J", "N"]),
    ("They eat ham daily", ["N", "V", "N", "R"]),
]


def tagger_pipeline(frozen=True, token_embed=False, elmo=True, layer_norm=False, **elmo_cfg):
    nlp = spacy.blank("en")
    if elmo:
        nlp.add_pipe("elmo", config={**ELMO, "frozen": frozen, **elmo_cfg})
    listener = {**LISTENER, "layer_norm": layer_norm}
    if token_embed:
        listener["token_embed"] = TOKEN_EMBED
    nlp.add_pipe(
        "tagger", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": listener}}
    )
    return nlp


def examples(nlp):
    return [Example.from_dict(nlp.make_doc(text), {"tags": tags}) for text, tags in DATA]


def train(nlp, steps=25, **update_kwargs):
    exs = examples(nlp)
    optimizer = nlp.initialize(lambda: exs, sgd=Adam(0.01))
    history = []
    for _ in range(steps):
        losses = {}
        nlp.update(exs, sgd=optimizer, losses=losses, **update_kwargs)
        history.append(losses["tagger"])
    return history


def bilm_state(nlp):
    elmo = nlp.get_pipe("elmo")
    elmo.initialize()  # the weights training starts from (its nlp.initialize() keeps them)
    return {k: v.clone() for k, v in elmo.bilm.state_dict().items()}


@pytest.mark.parametrize("token_embed", [False, True], ids=["elmo-only", "with-token-embed"])
def test_frozen_biLM_tagger_learns_and_biLM_does_not_change(token_embed):
    fix_random_seed(0)
    nlp = tagger_pipeline(token_embed=token_embed)
    before = bilm_state(nlp)
    history = train(nlp, steps=40)
    assert history[-1] < 0.7 * history[0]
    after = bilm_state(nlp)
    assert all(torch.equal(before[k], after[k]) for k in before)
    for text, tags in DATA:
        assert [t.tag_ for t in nlp(text)] == tags
    mix = nlp.get_pipe("tagger").model.get_ref("tok2vec").layers[0]  # its head
    assert not np.allclose(mix.get_param("s"), 0.0), "the task-specific mix weights are learned"


def test_fine_tuning_updates_the_biLM():
    nlp = tagger_pipeline(frozen=False)
    before = bilm_state(nlp)
    history = train(nlp, steps=10)
    assert history[-1] < history[0]
    after = bilm_state(nlp)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert (
        "forward_lstm.layers.1.weight_hh_l0" in changed
        and "token_encoder.projection.weight" in changed
    )


def test_frozen_and_annotating_components_as_spacy_train_uses_them():
    nlp = tagger_pipeline()
    exs = examples(nlp)
    with nlp.select_pipes(disable=["elmo"]):  # spacy train does not initialize frozen pipes
        optimizer = nlp.initialize(lambda: exs)
    before = bilm_state(nlp)
    losses = {}
    for _ in range(15):
        losses = {}
        nlp.update(exs, sgd=optimizer, losses=losses, exclude=["elmo"], annotates=["elmo"])
    assert "elmo" not in losses and losses["tagger"] > 0
    after = bilm_state(nlp)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_frozen_but_not_annotating_gives_a_clear_error():
    nlp = tagger_pipeline()
    exs = examples(nlp)
    optimizer = nlp.initialize(lambda: exs)
    with pytest.raises(ValueError, match="annotating_components"):
        nlp.update(exs, sgd=optimizer, exclude=["elmo"])


def test_listener_without_elmo_pipe_fails_clearly():
    nlp = tagger_pipeline(elmo=False)
    with pytest.raises(ValueError, match="found no 'elmo' pipe upstream"):
        nlp.initialize(lambda: examples(nlp))


def test_after_initialize_unannotated_docs_are_an_error_not_zeros():
    nlp = tagger_pipeline()
    exs = examples(nlp)
    nlp.initialize(lambda: exs)
    tagger = nlp.get_pipe("tagger")
    # The init-time sample docs got zeros; any other doc without layers must fail, even the
    # first call after initialize and without an annotated batch in between.
    for _ in range(2):
        with pytest.raises(ValueError, match="a doc has no ELMo layers"):
            list(nlp.pipe(["I like ham", "Eat eggs"], disable=["elmo"]))
    with pytest.raises(ValueError, match="a doc has no ELMo layers"):
        tagger(nlp.make_doc("I like ham"))
    annotated = nlp.get_pipe("elmo")(nlp.make_doc("I like ham"))
    assert [t.tag_ for t in tagger(annotated)] == [t.tag_ for t in nlp("I like ham")]


def test_trained_listener_without_its_elmo_pipe_fails_at_initialize(tmp_path):
    nlp = tagger_pipeline()
    train(nlp, steps=2)
    nlp.to_disk(tmp_path)
    # The listener knows its layer dims from training, but nothing feeds it now.
    alone = spacy.load(tmp_path, exclude=["elmo"])
    with pytest.raises(ValueError, match="found no 'elmo' pipe upstream"):
        alone.initialize(lambda: examples(alone))
    after = tagger_pipeline(elmo=False)
    after.add_pipe("elmo", config=ELMO)  # after the tagger: it feeds nothing
    with pytest.raises(ValueError, match="found no 'elmo' pipe upstream"):
        after.initialize(lambda: examples(after))


def test_store_layers_off_is_refused_by_listeners():
    nlp = tagger_pipeline(store_layers=False)
    exs = examples(nlp)
    optimizer = nlp.initialize(lambda: exs)
    with pytest.raises(ValueError, match="store_layers"):
        nlp.update(exs, sgd=optimizer)


@pytest.mark.parametrize("layer_norm", [False, True], ids=["plain-mix", "layer-norm-mix"])
def test_round_trip_and_replace_listeners(tmp_path, layer_norm):
    nlp = tagger_pipeline(token_embed=True, layer_norm=layer_norm)
    train(nlp, steps=10)
    texts = ["They like blue eggs", "Eat ham"]
    tag_scores = lambda pipeline: [  # noqa: E731
        pipeline.get_pipe("tagger").predict([pipeline(t)])[0] for t in texts
    ]
    expected = tag_scores(nlp)
    nlp.to_disk(tmp_path / "listening")
    loaded = spacy.load(tmp_path / "listening")
    for a, b in zip(tag_scores(loaded), expected):
        np.testing.assert_allclose(a, b, atol=1e-6)

    nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])
    assert nlp.get_pipe("elmo").listening_components == []
    for a, b in zip(tag_scores(nlp), expected):
        np.testing.assert_allclose(a, b, atol=1e-6)
    nlp.remove_pipe("elmo")
    tags = [[t.tag_ for t in nlp(text)] for text in texts]
    nlp.to_disk(tmp_path / "replaced")
    reloaded = spacy.load(tmp_path / "replaced")
    assert reloaded.pipe_names == ["tagger"]
    embedder_cfg = reloaded.config["components"]["tagger"]["model"]["tok2vec"]
    assert embedder_cfg["@architectures"] == "spacy_elmo.ElmoEmbedder.v2"
    assert embedder_cfg["layer_norm"] is layer_norm
    assert embedder_cfg["elmo"]["@architectures"] == "spacy_elmo.ElmoModel.v2"
    assert [[t.tag_ for t in reloaded(text)] for text in texts] == tags
    for text, expected_scores in zip(texts, expected):
        np.testing.assert_allclose(
            reloaded.get_pipe("tagger").predict([reloaded(text)])[0], expected_scores, atol=1e-6
        )


def test_replaced_listeners_keep_the_biLM_settings_after_saving(tmp_path):
    """The embedder's copy of the biLM runs with the pipe's model settings, also once saved and
    loaded: they travel in its config (ElmoEmbedder.v1 fell back to defaults there)."""
    nlp = tagger_pipeline(model={**ELMO["model"], "max_batch_tokens": 96, "precision": "bf16", "threads": 2})
    nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])
    nlp.remove_pipe("elmo")
    nlp.to_disk(tmp_path / "replaced")
    reloaded = spacy.load(tmp_path / "replaced")
    elmo = reloaded.get_pipe("tagger").model.get_ref("tok2vec").layers[0]
    settings = bilm_settings(elmo)
    assert (settings.max_batch_tokens, settings.precision, settings.threads) == (96, "bf16", 2)


def test_replace_a_listener_nested_as_the_embed_of_tok2vec(tmp_path):
    """The project's layout (the listener as spacy.Tok2Vec.v2's embed): replaced at its own path,
    the pipeline saves and loads without the elmo pipe and tags the same."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config=ELMO)
    tok2vec = {
        "@architectures": "spacy.Tok2Vec.v2",
        "embed": LISTENER,
        "encode": {"@architectures": "spacy.MaxoutWindowEncoder.v2", "width": 24, "depth": 1, "window_size": 1, "maxout_pieces": 2},
    }
    nlp.add_pipe("tagger", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": tok2vec}})
    train(nlp, steps=5)
    texts = ["They like blue eggs", "Eat ham"]
    scores = [nlp.get_pipe("tagger").predict([nlp(t)])[0] for t in texts]
    nlp.replace_listeners("elmo", "tagger", ["model.tok2vec.embed"])
    nlp.remove_pipe("elmo")
    nlp.to_disk(tmp_path / "replaced")
    reloaded = spacy.load(tmp_path / "replaced")
    assert reloaded.config["components"]["tagger"]["model"]["tok2vec"]["embed"]["@architectures"] == "spacy_elmo.ElmoEmbedder.v2"
    for text, expected in zip(texts, scores):
        np.testing.assert_allclose(reloaded.get_pipe("tagger").predict([reloaded(text)])[0], expected, atol=1e-6)


@pytest.mark.parametrize("layer_norm", [False, True], ids=["plain-mix", "layer-norm-mix"])
def test_mix_head_gradients_match_finite_differences(layer_norm):
    """d(loss)/d(s, gamma, layers) of the task-specific mix against central differences.
    Seeded: with unlucky Maxout weights a bump crosses a kink (two pieces nearly tied), where
    a central difference is not the derivative."""
    fix_random_seed(0)
    head = mix_head(width=5, layer_norm=layer_norm)
    head.set_dim("nL", 3)
    head.set_dim("nI", 4)
    head.initialize()
    rng = np.random.default_rng(0)
    head.set_param("s", rng.normal(size=3).astype("f"))
    head.set_param("gamma", np.asarray([1.3], dtype="f"))
    layers = [rng.normal(size=(3, n, 4)).astype("f") for n in (2, 3)]
    target = [rng.normal(size=(n, 5)).astype("f") for n in (2, 3)]

    def loss(lays):
        out, _ = head(([None, None], lays), is_train=False)
        return sum(float(((o - t) ** 2).sum()) / 2 for o, t in zip(out, target))

    out, backprop = head(([None, None], layers), is_train=True)
    d_layers = backprop([o - t for o, t in zip(out, target)])
    grads = {"s": head.get_grad("s").copy(), "gamma": head.get_grad("gamma").copy()}
    eps = 1e-3
    for name in ("s", "gamma"):
        value = head.get_param(name).astype("f8")
        for i in range(len(value)):
            plus, minus = value.copy(), value.copy()
            plus[i] += eps
            minus[i] -= eps
            head.set_param(name, plus.astype("f"))
            up = loss(layers)
            head.set_param(name, minus.astype("f"))
            down = loss(layers)
            head.set_param(name, value.astype("f"))
            assert grads[name][i] == pytest.approx((up - down) / (2 * eps), rel=2e-2, abs=2e-3), (
                name
            )
    for d in range(2):
        for index in [(0, 0, 0), (2, 1, 3), (1, 1, 2)]:
            bumped = [x.copy() for x in layers]
            bumped[d][index] += eps
            up = loss(bumped)
            bumped[d][index] -= 2 * eps
            down = loss(bumped)
            assert d_layers[d][index] == pytest.approx((up - down) / (2 * eps), rel=2e-2, abs=2e-3)


def test_cache_is_on_for_the_pipes_life_when_set_and_reuses_exact_layers():
    """cache_size_mb > 0 (frozen): every call looks its sentences up first, from the pipe's first
    call on, and keeps at most that many bytes; 0 (the default): no cache at all."""
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("elmo", config={**ELMO, "cache_size_mb": 1})
    texts = ["The bank raised rates .", "We sat on the river bank ."]
    first = [nlp(t)._.elmo_layers for t in texts]
    assert len(pipe.cache) == 2 and pipe.cache.misses == 2
    second = [nlp(t)._.elmo_layers for t in texts]
    assert pipe.cache.hits == 2 and pipe.cache.misses == 2
    pipe.update([Example(nlp.make_doc(t), nlp.make_doc(t)) for t in texts])  # training: the same
    assert pipe.cache.hits == 4 and pipe.cache.misses == 2
    uncached = spacy.blank("en")
    uncached.add_pipe("elmo", config=ELMO)
    assert uncached.get_pipe("elmo").cache is None
    for text, a, b in zip(texts, first, second):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(uncached(text)._.elmo_layers, a)
    fine_tuned = spacy.blank("en").add_pipe("elmo", config={**ELMO, "frozen": False, "cache_size_mb": 1})
    assert fine_tuned.cache is None  # the weights change: nothing to keep

    cache = LayerCache(max_bytes=1000)
    for i in range(10):
        cache.put(("w", i), np.zeros((3, 2, 16), dtype=np.float32))  # 384 bytes each
    assert cache.nbytes <= 1000 and len(cache) == 2
    assert cache.get(("w", 9)) is not None and cache.get(("w", 0)) is None
    # A copy or pickle (a spawned worker's pipe) starts empty, with its bound and its own lock.
    import pickle

    copied = pickle.loads(pickle.dumps(cache))
    assert len(copied) == 0 and copied.max_bytes == 1000
    copied.put(("w", 1), np.zeros((3, 2, 16), dtype=np.float32))
    assert len(copied) == 1 and len(cache) == 2


def test_a_listener_is_a_plain_thinc_model_whose_copy_keeps_working():
    """The listener's upstream name is an attr and its per-batch state an attr Thinc neither
    saves nor copies: Model.copy() gives a listener the pipeline links again, with its own head
    parameters, that predicts as the original."""
    from spacy_elmo.layers import listener as listeners

    nlp = tagger_pipeline()
    train(nlp, steps=3)
    tagger = nlp.get_pipe("tagger")
    original = tagger.model.get_ref("tok2vec")
    assert type(original) is Model and listeners.is_listener(original)
    copy = original.copy()
    assert listeners.is_listener(copy) and listeners.upstream_name(copy) == "*"
    assert listeners.listener_head(copy) is not listeners.listener_head(original)
    np.testing.assert_array_equal(listeners.listener_head(copy).get_param("s"), listeners.listener_head(original).get_param("s"))
    docs = list(nlp.pipe(["They eat ham", "I like eggs"]))
    expected = original.predict(docs)
    got = copy.predict(docs)
    for a, b in zip(expected, got):
        np.testing.assert_array_equal(a, b)
    # The copy is not linked until a pipeline links it; the original's link is untouched.
    assert copy.attrs[listeners.STATE].upstream is None
    assert original.attrs[listeners.STATE].upstream is nlp.get_pipe("elmo").model
    tagger.model.replace_node(original, copy)
    nlp.get_pipe("elmo").find_listeners(tagger)
    assert copy.attrs[listeners.STATE].upstream is nlp.get_pipe("elmo").model
    assert [t.tag_ for t in nlp("They eat ham")] == [t.tag_ for t in tagger(nlp.get_pipe("elmo")(nlp.make_doc("They eat ham")))]


def test_a_listener_takes_its_dims_at_init_and_refuses_layers_of_another_biLM():
    """The pipe pushes nothing into its listeners: a listener reads the biLM's layer count and
    width at its init, and layers of another shape (the pipe's model swapped after training) are
    an error naming both."""
    from spacy_elmo.layers.listener import listener_head

    nlp = tagger_pipeline()
    listener = next(node for node in nlp.get_pipe("tagger").model.walk() if node.name == "elmo-listener")
    assert not listener_head(listener).has_dim("nL")
    nlp.initialize(lambda: examples(nlp))
    bilm = nlp.get_pipe("elmo").bilm
    assert (listener_head(listener).get_dim("nL"), listener_head(listener).get_dim("nI")) == (bilm.n_output_layers, bilm.output_dim)
    doc = nlp("Eat blue ham")
    doc._.elmo_output.layers = doc._.elmo_output.layers[:2]
    with pytest.raises(ValueError, match="built for a biLM with nL=3, the upstream elmo pipe has 2"):
        listener.predict([doc])
