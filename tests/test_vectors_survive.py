"""token/span/doc .vector and similarity stay ELMo where spaCy drops user hooks: doc bytes,
``nlp.pipe(n_process=2)``, a DocBin on disk read by a pipeline from ``spacy.load``.

The pipeline is built as a user's would be: a tok2vec with a parser listening to it (trained a few
steps here; the en_core_web_sm layout, where the tok2vec also writes ``doc.tensor``), then the
elmo pipe with the bundled model. No test calls ``add_vector_hooks`` unless it says why.
"""

import warnings
from pathlib import Path

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.training.converters import conllu_to_docs
from thinc.api import fix_random_seed

from spacy_elmo.pipe import add_vector_hooks

EWT = Path(__file__).resolve().parents[1] / "project" / "demo_data" / "ud-english-ewt" / "dev.conllu"
TEXTS = [
    "The bank raised its rates. She sat on the river bank.",
    "They walked along the river. The bank was closed.",
    "Rates rose again.",
]

LISTENING_PARSER = {
    "model": {
        "@architectures": "spacy.TransitionBasedParser.v2",
        "state_type": "parser",
        "extra_state_tokens": False,
        "hidden_width": 32,
        "maxout_pieces": 2,
        "use_upper": True,
        "nO": None,
        "tok2vec": {"@architectures": "spacy.Tok2VecListener.v1", "width": 96, "upstream": "tok2vec"},
    }
}


@pytest.fixture(scope="module")
def parser_nlp():
    """blank English + tok2vec + a parser listening to it, trained a few steps on 40 EWT
    sentences (the demo slice shipped with the project)."""
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("tok2vec")
    nlp.add_pipe("parser", config=LISTENING_PARSER)
    gold = list(conllu_to_docs(EWT.read_text(encoding="utf-8"), n_sents=1))[:40]
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in gold]
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(5):
        nlp.update(examples, sgd=optimizer)
    return nlp


@pytest.fixture(scope="module")
def nlp(parser_nlp):
    parser_nlp.add_pipe("elmo")  # last: the parser's listener reads the tok2vec's doc.tensor first
    return parser_nlp


def _quiet():
    """W007 (similarity without static vectors) and W109 (hooks not serialised) are expected."""
    context = warnings.catch_warnings()
    context.__enter__()
    warnings.simplefilter("ignore")
    return context


def _cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _assert_elmo_vectors(doc, expected):
    """.vector of tokens, spans and the doc, and similarity of different words, are ELMo."""
    assert doc._.elmo.shape == expected.shape
    np.testing.assert_array_equal(doc._.elmo, expected)
    for token in doc:
        np.testing.assert_array_equal(token.vector, expected[token.i])
        assert token.has_vector
    np.testing.assert_allclose(doc[1:4].vector, expected[1:4].mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(doc.vector, expected.mean(axis=0), rtol=1e-5, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert doc[1].similarity(doc[2]) == pytest.approx(_cosine(expected[1], expected[2]), abs=1e-5)
        assert doc[0:2].similarity(doc[2:5]) == pytest.approx(
            _cosine(expected[0:2].mean(0), expected[2:5].mean(0)), abs=1e-5
        )


def test_the_parser_still_parses_and_elmo_vectors_are_in_the_tensor(nlp, parser_nlp):
    doc = nlp(TEXTS[0])
    assert doc.has_annotation("DEP") and len(list(doc.sents)) >= 1
    assert doc.tensor.shape == doc._.elmo.shape == (len(doc), 256)  # not the tok2vec's 96
    _assert_elmo_vectors(doc, doc._.elmo)


def test_doc_bytes_without_hooks(nlp):
    doc = nlp(TEXTS[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # W109: the hooks stay behind
        data = doc.to_bytes()
    restored = Doc(nlp.vocab).from_bytes(data)
    assert not restored.user_token_hooks  # spaCy dropped them: the vectors come from doc.tensor
    _assert_elmo_vectors(restored, doc._.elmo)
    np.testing.assert_array_equal(restored._.elmo_layers, doc._.elmo_layers)
    # The vectors are serialised once (in doc.tensor), not also in user_data.
    assert len(data) < doc._.elmo_layers.nbytes + 1.5 * doc._.elmo.nbytes


@pytest.mark.slow
def test_n_process_2_without_hooks(nlp):
    expected = [doc._.elmo for doc in nlp.pipe(TEXTS)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        docs = list(nlp.pipe(TEXTS, n_process=2, batch_size=1))
    for doc, vectors in zip(docs, expected):
        assert doc.has_annotation("DEP")
        np.testing.assert_allclose(doc._.elmo, vectors, atol=1e-5)  # other batches: rounding
        _assert_elmo_vectors(doc, doc._.elmo)


def test_docbin_on_disk_read_by_a_loaded_pipeline(nlp, tmp_path):
    """DocBin keeps no doc.tensor: doc._.elmo is recomputed from the stored layers and mix, and
    .vector needs one call, add_vector_hooks, which puts the tensor back (spaCy's DocBin.get_docs
    runs no code of ours: it builds each Doc from token attributes and copies user_data)."""
    expected = [doc._.elmo for doc in nlp.pipe(TEXTS)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DocBin(store_user_data=True, docs=nlp.pipe(TEXTS)).to_disk(tmp_path / "docs.spacy")
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    docs = list(DocBin().from_disk(tmp_path / "docs.spacy").get_docs(loaded.vocab))
    for doc, vectors in zip(docs, expected):
        assert doc.tensor.size == 0
        np.testing.assert_array_equal(doc._.elmo, vectors)
        add_vector_hooks(doc)
        _assert_elmo_vectors(doc, vectors)
        assert doc[1].similarity(doc[1]) == pytest.approx(1.0)


def test_same_text_tokens_need_the_hooks(nlp):
    """spaCy answers 1.0 for two tokens with the same text unless a similarity hook is set: the
    in-memory hooks give the contextual cosine; after bytes, add_vector_hooks restores it."""
    doc = nlp("The bank raised its rates. She sat on the river bank.")
    banks = [t for t in doc if t.text == "bank"]
    cosine = _cosine(banks[0].vector, banks[1].vector)
    assert cosine < 0.99
    assert banks[0].similarity(banks[1]) == pytest.approx(cosine, abs=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        restored = Doc(nlp.vocab).from_bytes(doc.to_bytes())
    banks = [t for t in restored if t.text == "bank"]
    assert banks[0].similarity(banks[1]) == 1.0  # spaCy's shortcut
    add_vector_hooks(restored)
    assert banks[0].similarity(banks[1]) == pytest.approx(cosine, abs=1e-5)


def test_elmo_before_a_tok2vec_listener_is_refused(parser_nlp):
    """The parser's tok2vec listener reads doc.tensor at inference: the elmo pipe, which writes
    its vectors there, must come after it. spaCy's initialize says so, naming both pipes."""
    import copy

    nlp = copy.deepcopy(parser_nlp)
    if "elmo" in nlp.pipe_names:
        nlp.remove_pipe("elmo")
    elmo = nlp.add_pipe("elmo", before="parser")
    with pytest.raises(ValueError, match="elmo pipe 'elmo' comes before 'parser', whose tok2vec listener"):
        elmo.initialize(nlp=nlp)
    nlp.remove_pipe("elmo")
    nlp.add_pipe("elmo").initialize(nlp=nlp)  # last: fine


README_TEXT = "The river bank flooded. The bank raised its rates."  # the README's two "bank"s: 2 and 6


@pytest.fixture(scope="module")
def readme_nlp():
    """The README's pipeline: a sentencizer, then the elmo pipe with the bundled model."""
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("elmo")
    return nlp


@pytest.mark.slow
def test_spacy_elmo_restore_brings_back_what_bytes_drop(readme_nlp, tmp_path):
    """The README's example through n_process=2, a DocBin on disk and doc bytes: without restore,
    spaCy compares the two "bank"s as 1.0 and a DocBin's tokens have no vector; spacy_elmo.restore
    gives back the in-process cosine and vectors, for a stream and for one doc."""
    import spacy_elmo

    nlp = readme_nlp
    doc = nlp(README_TEXT)
    cosine = doc[2].similarity(doc[6])
    assert doc[2].text == doc[6].text == "bank" and cosine < 0.99
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # W007: similarity without vectors in the vocab
        workers = list(nlp.pipe([README_TEXT] * 4, n_process=2, batch_size=1))
        assert workers[0][2].similarity(workers[0][6]) == 1.0  # spaCy's same-word shortcut
        DocBin(store_user_data=True, docs=workers).to_disk(tmp_path / "docs.spacy")
        from_disk = list(DocBin().from_disk(tmp_path / "docs.spacy").get_docs(nlp.vocab))
        assert from_disk[0][2].vector.size == 0
        from_bytes = Doc(nlp.vocab).from_bytes(doc.to_bytes())
    restored = [*spacy_elmo.restore(workers), *spacy_elmo.restore(iter(from_disk)), spacy_elmo.restore(from_bytes)]
    assert len(restored) == 9
    for again in restored:
        assert again[2].similarity(again[6]) == pytest.approx(cosine, abs=1e-5)
        _assert_elmo_vectors(again, doc._.elmo if again is from_bytes else again._.elmo)
        np.testing.assert_allclose(again._.elmo, doc._.elmo, atol=1e-5)


def test_restore_names_the_doc_without_an_elmo_output(readme_nlp, tmp_path):
    """A DocBin saved without user data keeps no ELMo output: restore says which doc of the
    stream and how to save it; a doc the pipe never saw gets the same answer."""
    import spacy_elmo

    nlp = readme_nlp
    DocBin(docs=nlp.pipe([README_TEXT, "Rates rose again."])).to_disk(tmp_path / "plain.spacy")
    docs = spacy_elmo.restore(DocBin().from_disk(tmp_path / "plain.spacy").get_docs(nlp.vocab))
    with pytest.raises(ValueError, match=r"restore: doc 0 of the stream \('The river bank flooded.*DocBin\(store_user_data=True\)"):
        next(docs)
    with pytest.raises(ValueError, match="run the elmo pipe on it first"):
        spacy_elmo.restore(nlp.make_doc("Never annotated."))
