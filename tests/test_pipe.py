"""The ``elmo`` pipe in real spaCy pipelines: outputs, splitting, hooks, errors, serialization.

Expected vectors come from ``load_bilm`` (the PyTorch biLM, itself checked against bilm-tf's
outputs in test_bilm.py) run on the same token sequences.
"""

import pickle
import shutil
import warnings

import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from thinc.api import ConfigValidationError

from conftest import assert_float32_close, make_options, write_random_bilm_tf
from spacy_elmo import DEFAULT_MODEL, ScalarMix, batch_to_ids, load_bilm, save_bilm
from spacy_elmo.pipe import add_vector_hooks, batch_by_length, split_sequences

WIDTH = 32


def _layers(bilm, words):
    """(n_layers + 1, len(words), width): one sequence alone through the biLM."""
    with torch.no_grad():
        return bilm(torch.from_numpy(batch_to_ids([words])))[0][:, 0].numpy()


@pytest.fixture
def nlp(fixture_files):
    nlp = spacy.blank("en")
    options, weights = fixture_files
    nlp.add_pipe("elmo", config={"model": {"options_file": str(options), "weight_file": str(weights)}})
    return nlp


@pytest.fixture
def sentences(fixture_sentences):
    return [s.split() for s in fixture_sentences[0][:6]]


# What the pipe writes


def test_vectors_are_the_bilm_outputs_of_each_sentence(nlp, fixture_bilm, sentences):
    docs = list(nlp.pipe([Doc(nlp.vocab, words=words) for words in sentences]))
    # Peters et al. eq. 1, gamma = 1, over the LSTM layers: the default leaves the token layer out
    mix = ScalarMix(2, trainable=False)
    for doc, words in zip(docs, sentences):
        expected = _layers(fixture_bilm, words)
        assert doc._.elmo_layers.shape == (3, len(words), WIDTH)
        assert doc._.elmo.shape == (len(words), WIDTH)
        assert doc._.elmo.dtype == doc._.elmo_layers.dtype == np.float32
        assert_float32_close(doc._.elmo_layers, expected)
        with torch.no_grad():
            assert_float32_close(doc._.elmo, mix(torch.from_numpy(expected[1:])).numpy())


def test_the_outputs_are_numpy_arrays_on_any_device(fixture_files, spacy_device):
    """After ``spacy.require_gpu()`` the biLM runs on the GPU and every output is still a NumPy
    array on the CPU (CuPy arrays would break users' code and ``doc.to_bytes``)."""
    nlp = spacy.blank("en")
    options, weights = map(str, fixture_files)
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("elmo", config={"model": {"options_file": options, "weight_file": weights}})
    doc = nlp("The bank raised its rates . The river bank flooded .")
    assert next(nlp.get_pipe("elmo").bilm.parameters()).device.type == spacy_device.type
    outputs = {"doc._.elmo": doc._.elmo, "doc._.elmo_layers": doc._.elmo_layers, "doc.tensor": doc.tensor,
               "token.vector": doc[1].vector, "span.vector": doc[1:3].vector, "doc.vector": doc.vector}  # fmt: skip
    assert {name: type(a) for name, a in outputs.items()} == {name: np.ndarray for name in outputs}
    assert doc._.elmo.shape == (len(doc), WIDTH) and doc._.elmo_layers.shape == (3, len(doc), WIDTH)


def test_fixed_mix_weights_and_gamma(fixture_files, fixture_bilm):
    nlp = spacy.blank("en")
    options, weights = map(str, fixture_files)
    nlp.add_pipe(
        "elmo",
        config={"model": {"options_file": options, "weight_file": weights}, "mix_weights": [0, 0, 3], "gamma": 2.0, "store_layers": False},
    )
    doc = nlp("Only the top layer , doubled .")
    assert_float32_close(doc._.elmo, 2 * _layers(fixture_bilm, [t.text for t in doc])[-1])
    assert doc._.elmo_layers is None


def test_token_span_and_doc_vectors(nlp):
    doc = nlp("The bank of the river flooded . The bank raised rates .")
    for token in doc:
        assert np.array_equal(token.vector, doc._.elmo[token.i])
        assert np.array_equal(token._.elmo, doc._.elmo[token.i])
    span = doc[1:5]
    np.testing.assert_allclose(span._.elmo, doc._.elmo[1:5].mean(axis=0), rtol=1e-6)
    np.testing.assert_array_equal(span.vector, span._.elmo)
    np.testing.assert_allclose(doc.vector, doc._.elmo.mean(axis=0), rtol=1e-6)
    a, b = doc[1], doc[8]
    cosine = a.vector @ b.vector / np.linalg.norm(a.vector) / np.linalg.norm(b.vector)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no W007 ("no word vectors loaded")
        assert a.similarity(b) == pytest.approx(cosine, rel=1e-6)
        assert a.similarity(b) < 1.0  # same word, different contexts
        assert doc[0:6].similarity(doc[7:12]) == pytest.approx(
            float(doc[0:6].vector @ doc[7:12].vector / doc[0:6].vector_norm / doc[7:12].vector_norm), rel=1e-6
        )
        assert doc.similarity(doc) == pytest.approx(1.0)


def test_hooks_win_over_static_vectors(fixture_files):
    nlp = spacy.blank("en")
    nlp.vocab.set_vector("bank", np.ones(5, dtype=np.float32))
    options, weights = map(str, fixture_files)
    nlp.add_pipe("elmo", config={"model": {"options_file": options, "weight_file": weights}})
    doc = nlp("the bank")
    assert doc[1].vector.shape == (WIDTH,)
    assert np.array_equal(doc[1].vector, doc._.elmo[1])

    nlp.get_pipe("elmo").set_vector_hooks = False
    doc = nlp("the bank")
    assert doc[1].vector.shape == (5,)  # the static vector again
    assert doc._.elmo.shape == (2, WIDTH)


# Sentences, windows, whitespace


def test_each_sentence_is_one_sequence(nlp, fixture_bilm):
    text = "The river bank was muddy . She went to the bank ."
    nlp_sents = spacy.blank("en")
    nlp_sents.add_pipe("sentencizer")
    nlp_sents.add_pipe("elmo", source=nlp)
    doc = nlp_sents(text)
    assert [s.text for s in doc.sents] == ["The river bank was muddy .", "She went to the bank ."]
    for sentence in doc.sents:
        words = [t.text for t in sentence]
        assert_float32_close(doc._.elmo_layers[:, sentence.start : sentence.end], _layers(fixture_bilm, words))
    whole = nlp(text)  # no sentence boundaries: one window for the whole doc
    assert_float32_close(whole._.elmo_layers, _layers(fixture_bilm, text.split()))
    assert not np.allclose(whole._.elmo[6:], doc._.elmo[6:], atol=1e-3)


def test_docs_without_sentences_are_cut_into_windows(fixture_files, fixture_bilm):
    nlp = spacy.blank("en")
    options, weights = map(str, fixture_files)
    nlp.add_pipe("elmo", config={"model": {"options_file": options, "weight_file": weights, "max_sequence_length": 4}})
    words = [f"w{i}" for i in range(10)]
    doc = nlp(Doc(nlp.vocab, words=words))
    for start, end in [(0, 4), (4, 7), (7, 10)]:  # ceil(10 / 4) = 3 windows of near-equal length
        assert_float32_close(doc._.elmo_layers[:, start:end], _layers(fixture_bilm, words[start:end]))


def test_split_sequences_skips_whitespace_and_cuts_long_sentences():
    vocab = spacy.blank("en").vocab
    doc = Doc(vocab, words=["a", " ", "b", "c", "\n\n", "d", "e", "f", "g", "h"],
              sent_starts=[True, False, False, False, False, True, False, False, False, False])
    assert [s.tolist() for s in split_sequences(doc, 3)] == [[0, 2, 3], [5, 6, 7], [8, 9]]
    doc = Doc(vocab, words=["a", " ", "b"])
    assert [s.tolist() for s in split_sequences(doc, 256)] == [[0, 2]]
    assert split_sequences(Doc(vocab, words=[" ", "\n"]), 256) == []


def test_batch_by_length_respects_the_token_budget():
    lengths = [3, 10, 1, 7, 7, 2, 25]
    batches = batch_by_length(lengths, max_tokens=20)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert batches[0] == [6]  # longer than the budget: alone
    for batch in batches:
        assert lengths[batch[0]] == max(lengths[i] for i in batch)
        assert len(batch) == 1 or len(batch) * lengths[batch[0]] <= 20
    assert [lengths[b[0]] for b in batches] == sorted((lengths[b[0]] for b in batches), reverse=True)


def test_whitespace_tokens_get_zero_vectors_and_do_not_reach_the_bilm(nlp, fixture_bilm):
    doc = nlp("Hello  world\n\nagain")
    assert [t.text for t in doc] == ["Hello", " ", "world", "\n\n", "again"]
    read = [0, 2, 4]
    assert_float32_close(doc._.elmo_layers[:, read], _layers(fixture_bilm, ["Hello", "world", "again"]))
    assert not doc._.elmo[[1, 3]].any()
    assert [t.has_vector for t in doc] == [True, False, True, False, True]


# Odd input


def test_empty_text(nlp):
    doc = nlp("")
    assert doc._.elmo.shape == (0, WIDTH) and doc._.elmo_layers.shape == (3, 0, WIDTH)
    assert doc.vector.shape == (WIDTH,) and not doc.vector.any()
    assert not doc.has_vector


def test_only_whitespace(nlp):
    doc = nlp(" \n\n\t ")
    assert doc._.elmo.shape == (len(doc), WIDTH)
    assert not doc._.elmo.any()
    assert not doc.has_vector


def test_mixed_scripts_emoji_and_long_tokens(nlp, fixture_bilm):
    doc = nlp("Tokyo 東京 Москва مرحبا 😀👍🏽 " + "x" * 80 + " naïve")
    words = [t.text for t in doc]
    assert np.isfinite(doc._.elmo).all()
    assert_float32_close(doc._.elmo_layers, _layers(fixture_bilm, words))


def test_a_100000_token_doc_without_sentences(fixture_files, fixture_bilm):
    nlp = spacy.blank("en")
    options, weights = map(str, fixture_files)
    nlp.add_pipe("elmo", config={"model": {"options_file": options, "weight_file": weights}, "store_layers": False})
    words = [f"t{i % 97}" for i in range(100_000)]
    doc = nlp(Doc(nlp.vocab, words=words))
    assert doc._.elmo.shape == (100_000, WIDTH)
    assert np.isfinite(doc._.elmo).all() and np.abs(doc._.elmo).sum(axis=1).min() > 0
    # ceil(100000 / 256) = 391 windows: the first 295 hold 256 tokens, the others 255
    first = _layers(fixture_bilm, words[:256])[1:].mean(axis=0)  # the default mix: LSTM layers
    assert_float32_close(doc._.elmo[:256], first)
    last = _layers(fixture_bilm, words[-255:])[1:].mean(axis=0)
    assert_float32_close(doc._.elmo[-255:], last)


# Weights: lazy loading, native checkpoints, errors


def test_works_with_and_without_initialize(nlp):
    before = nlp("No initialize needed .")._.elmo
    nlp.initialize()
    np.testing.assert_array_equal(nlp("No initialize needed .")._.elmo, before)


def test_call_and_pipe_are_spacys_and_keep_its_error_handler(nlp):
    """The pipe writes only predict and set_annotations: spaCy's TrainablePipe runs them, under
    the pipeline's error handler, in groups of batch_size."""
    from spacy.pipeline import TrainablePipe

    from spacy_elmo.pipe import Elmo

    assert Elmo.__call__ is TrainablePipe.__call__ and Elmo.pipe is TrainablePipe.pipe
    pipe = nlp.get_pipe("elmo")
    failed = []
    pipe.set_error_handler(lambda name, proc, docs, err: failed.append((name, len(docs), type(err))))
    pipe.predict = lambda docs: 1 / 0
    assert pipe(nlp.make_doc("One .")) is None and list(pipe.pipe(nlp.tokenizer.pipe(["a", "b", "c"]), batch_size=2)) == []
    assert failed == [("elmo", 1, ZeroDivisionError), ("elmo", 2, ZeroDivisionError), ("elmo", 1, ZeroDivisionError)]


def test_native_checkpoint_and_model_directory(tmp_path, nlp, fixture_files):
    expected = nlp("Same weights , other file .")._.elmo
    save_bilm(load_bilm(*fixture_files), tmp_path / "native")
    hdf5_dir = tmp_path / "released"
    hdf5_dir.mkdir()
    shutil.copy(fixture_files[0], hdf5_dir / "options.json")
    shutil.copy(fixture_files[1], hdf5_dir / "weights.hdf5")
    for directory in (tmp_path / "native", hdf5_dir):
        other = spacy.blank("en")
        other.add_pipe("elmo", config={"model": {"weights": str(directory)}})
        assert_float32_close(other("Same weights , other file .")._.elmo, expected)


def _pipe_with(**model):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {k: str(v) for k, v in model.items()}})
    return nlp


@pytest.mark.parametrize("when", ["initialize", "first use"])
def test_missing_files_and_unknown_names_are_refused_at_initialize_and_first_use(tmp_path, fixture_files, when):
    """The model's init reads the weights (nlp.initialize(), or the first doc without it): a
    typo fails there, naming the pipe and the file, before any doc gets vectors. add_pipe reads
    nothing: spacy.load builds its pipes the same way, from configs whose files may be gone."""
    options, weights = fixture_files
    (tmp_path / "empty").mkdir()
    for model, error in [
        ({"options_file": tmp_path / "nope.json", "weight_file": weights}, "elmo pipe 'elmo': .*nope.json"),
        ({"options_file": options, "weight_file": tmp_path / "nope.hdf5"}, "elmo pipe 'elmo': .*nope.hdf5"),
        ({"weights": tmp_path / "nowhere"}, "elmo pipe 'elmo': weights .*nowhere does not exist"),
        ({"weights": "no-such-model"}, "'no-such-model' is neither a model directory nor a downloaded model"),
        ({"weights": tmp_path / "empty"}, "empty: no model.safetensors or weights.hdf5"),
    ]:
        nlp = _pipe_with(**model)
        with pytest.raises(FileNotFoundError, match=error):
            nlp.initialize() if when == "initialize" else nlp("x")
        with pytest.raises(ValueError, match="elmo pipe 'elmo' has no weights to save yet: call nlp.initialize"):
            nlp.to_bytes()  # the failed read left nothing half-loaded to save


def test_a_pipeline_loaded_from_disk_never_needs_the_files_its_config_names(tmp_path, fixture_files):
    """spacy.load builds the pipe from its config, then reads the weights from the pipeline: the
    files the config names may be gone on this machine."""
    options, weights = fixture_files
    (tmp_path / "model").mkdir()
    for path in fixture_files:
        shutil.copy(path, tmp_path / "model" / path.name)
    nlp = _pipe_with(weights=tmp_path / "model")
    expected = nlp("Moved pipelines load .")._.elmo
    nlp.to_disk(tmp_path / "pipeline")
    shutil.rmtree(tmp_path / "model")
    np.testing.assert_array_equal(spacy.load(tmp_path / "pipeline")("Moved pipelines load .")._.elmo, expected)


def test_corrupt_and_mismatched_weight_files_name_the_file(tmp_path, fixture_files):
    options, weights = fixture_files
    corrupt = tmp_path / "corrupt.hdf5"
    corrupt.write_bytes(weights.read_bytes()[:5000])
    with pytest.raises(ValueError, match="corrupt.hdf5"):
        _pipe_with(options_file=options, weight_file=corrupt)("x")
    other_options, _ = write_random_bilm_tf(tmp_path / "other", make_options())
    with pytest.raises(ValueError, match="lm_weights.hdf5"):
        _pipe_with(options_file=other_options, weight_file=weights)("x")


def test_default_model_is_bundled_and_contextual():
    """add_pipe("elmo") with no config loads the model that ships inside the package."""
    assert (DEFAULT_MODEL / "options.json").is_file() and (DEFAULT_MODEL / "model.safetensors").is_file()
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    river, money = nlp("We sat on the bank of the river ."), nlp("The bank raised its interest rates .")
    assert river._.elmo.shape == (9, 256) and river._.elmo_layers.shape == (3, 9, 256)
    # Layer 0 is context-free: the same word gives the same vector; the LSTM layers do not.
    assert_float32_close(river._.elmo_layers[0, 4], money._.elmo_layers[0, 1])
    assert river[4].text == money[1].text == "bank" and river[4].similarity(money[1]) < 0.99
    # The bundled vocabulary feeds the token cache.
    cached = spacy.blank("en")
    cached.add_pipe("elmo", config={"model": {"token_cache_words": 1000}})
    assert_float32_close(cached(river.text)._.elmo, river._.elmo)


def test_missing_default_model_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setattr("spacy_elmo.sources.DEFAULT_MODEL", tmp_path / "en_wikitext_small")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    with pytest.raises(FileNotFoundError, match="elmo pipe 'elmo': .*en_wikitext_small is not in this installation.*download small"):
        nlp("x")


def test_config_errors_name_the_key(fixture_files):
    options, weights = map(str, fixture_files)
    nlp = spacy.blank("en")
    with pytest.raises(ConfigValidationError, match="max_sequence_length"):
        nlp.add_pipe("elmo", config={"model": {"max_sequence_length": "long"}})
    with pytest.raises(ConfigValidationError, match="max_batch_size"):
        nlp.add_pipe("elmo", config={"max_batch_size": 10})
    with pytest.raises(ValueError, match="max_batch_tokens must be >= 1, got 0"):
        nlp.add_pipe("elmo", config={"model": {"max_batch_tokens": 0}})
    with pytest.raises(ValueError, match=r"^elmo pipe: mix_weights\[1\] must be >= 0, got -1$"):
        nlp.add_pipe("elmo", config={"mix_weights": [1, -1, 1]})
    with pytest.raises(ValueError, match="weight_file is missing"):
        nlp.add_pipe("elmo", config={"model": {"options_file": options}})
    with pytest.raises(ValueError, match="set weights, or options_file and weight_file, not both"):
        nlp.add_pipe("elmo", config={"model": {"weights": "x", "options_file": options, "weight_file": weights}})
    nlp.add_pipe("elmo", config={"model": {"options_file": options, "weight_file": weights}, "mix_weights": [1, 1]})
    with pytest.raises(ValueError, match="mix_weights has 2 weights, the model has 3 layers"):
        nlp.initialize()


def test_a_second_elmo_pipe_is_refused():
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    with pytest.raises(ValueError, match="elmo pipe 'elmo2': the pipeline already has an elmo pipe \\('elmo'\\)"):
        nlp.add_pipe("elmo", name="elmo2")
    nlp.replace_pipe("elmo", "elmo", config={"gamma": 2.0})  # replacing the one pipe is fine
    assert nlp.pipe_names == ["elmo"] and nlp.get_pipe("elmo").gamma == 2.0


# Serialization


def test_pipeline_to_disk_and_spacy_load(tmp_path, fixture_files):
    """The saved pipeline carries the weights: it loads after the original files are gone."""
    for name, source in zip(("options.json", "weights.hdf5"), fixture_files):
        shutil.copy(source, tmp_path / name)
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("elmo", config={"model": {"options_file": str(tmp_path / "options.json"), "weight_file": str(tmp_path / "weights.hdf5")}, "gamma": 0.5})
    with pytest.raises(ValueError, match="has no weights to save yet"):
        nlp.to_disk(tmp_path / "pipeline")  # saving reads nothing: the weights arrive at initialize
    nlp.initialize()
    nlp.to_disk(tmp_path / "pipeline")
    (tmp_path / "options.json").unlink()
    (tmp_path / "weights.hdf5").unlink()
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.pipe_names == ["sentencizer", "elmo"]
    text = "Saved and loaded . The vectors must not change ."
    np.testing.assert_array_equal(loaded(text)._.elmo, nlp(text)._.elmo)
    np.testing.assert_array_equal(loaded(text)._.elmo_layers, nlp(text)._.elmo_layers)
    assert loaded.get_pipe("elmo").gamma == 0.5


def test_pipe_and_pipeline_bytes(nlp, fixture_files):
    text = "Bytes in , bytes out ."
    expected = nlp(text)._.elmo
    config = nlp.config.copy()
    config["components"]["elmo"]["model"].update(options_file="missing.json", weight_file="missing.hdf5")
    other = spacy.util.load_model_from_config(config)  # spaCy's way to restore from bytes
    other.get_pipe("elmo").from_bytes(nlp.get_pipe("elmo").to_bytes())
    np.testing.assert_array_equal(other(text)._.elmo, expected)
    restored = spacy.util.load_model_from_config(config)
    restored.from_bytes(nlp.to_bytes())
    np.testing.assert_array_equal(restored(text)._.elmo, expected)


def test_doc_bytes_keep_the_vectors_and_hooks_come_back(nlp):
    doc = nlp("Doc bytes keep user data .")
    with pytest.warns(UserWarning, match="W109"):  # spaCy drops user hooks
        data = doc.to_bytes()
    restored = Doc(nlp.vocab).from_bytes(data)
    np.testing.assert_array_equal(restored._.elmo, doc._.elmo)
    np.testing.assert_array_equal(restored._.elmo_layers, doc._.elmo_layers)
    np.testing.assert_array_equal(restored[2]._.elmo, doc._.elmo[2])
    add_vector_hooks(restored)
    np.testing.assert_array_equal(restored[2].vector, doc._.elmo[2])
    restored_pickle = pickle.loads(pickle.dumps(doc))  # pickling keeps the hooks
    np.testing.assert_array_equal(restored_pickle[2].vector, doc._.elmo[2])


def test_docbin_keeps_the_vectors_with_user_data(nlp):
    docs = list(nlp.pipe(["First doc .", "", "Second doc , longer ."]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = DocBin(store_user_data=True, docs=docs).to_bytes()
        plain = DocBin(docs=docs).to_bytes()
    restored = list(DocBin().from_bytes(data).get_docs(nlp.vocab))
    for doc, copy in zip(docs, restored):
        np.testing.assert_array_equal(copy._.elmo, doc._.elmo)
        np.testing.assert_array_equal(copy._.elmo_layers, doc._.elmo_layers)
    assert next(DocBin().from_bytes(plain).get_docs(nlp.vocab))._.elmo is None


@pytest.mark.slow
def test_n_process_2(nlp):
    texts = [f"Sentence number {i} goes to another process ." for i in range(12)]
    expected = [doc._.elmo for doc in nlp.pipe(texts)]  # torch has run in this process first
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # W109: the hooks stay behind in the workers
        docs = list(nlp.pipe(texts, n_process=2, batch_size=4))
    for doc, vectors in zip(docs, expected):
        assert_float32_close(doc._.elmo, vectors)
        assert doc._.elmo_layers.shape == (3, len(doc), WIDTH)
        add_vector_hooks(doc)
        np.testing.assert_array_equal(doc[1].vector, doc._.elmo[1])


def test_update_annotates_the_predicted_docs_and_learns_nothing(nlp):
    doc = nlp.make_doc("Training passes through .")
    example = Example(doc, doc.copy())
    elmo = nlp.get_pipe("elmo")
    elmo.initialize()
    before = {k: v.clone() for k, v in elmo.bilm.state_dict().items()}
    losses = elmo.update([example])
    assert losses == {"elmo": 0.0}
    assert example.predicted._.elmo.shape == (4, WIDTH)  # what components trained after it read
    nlp.update([example], sgd=nlp.create_optimizer())  # a training step runs, changes nothing
    after = elmo.bilm.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


# Speed settings


def test_token_cache_words_give_identical_vectors_and_survive_serialization(tmp_path, fixture_files, fixture_bilm, sentences):
    """token_cache_words pre-fills the cache with the first N words of the vocabulary beside the
    weights, then keeps the N most recently seen."""
    model_dir = tmp_path / "model"
    save_bilm(fixture_bilm, model_dir)
    vocab = ["<S>", "</S>", "<UNK>"] + [w for s in sentences for w in s]
    (model_dir / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    nlp = spacy.blank("en")
    elmo = nlp.add_pipe("elmo", config={"model": {"weights": str(model_dir), "token_cache_words": 20}})
    nlp.initialize()
    assert len(elmo.runner.token_cache) == len(set(vocab[:20]))
    docs = [nlp(" ".join(words)) for words in sentences]
    assert len(elmo.runner.token_cache) == elmo.runner.token_cache.max_words == 20
    for doc in docs:
        assert_float32_close(doc._.elmo_layers, _layers(fixture_bilm, [t.text for t in doc]))
    nlp.to_disk(tmp_path / "pipeline")
    shutil.rmtree(model_dir)  # the loaded pipeline needs neither the weights nor the vocabulary
    loaded = spacy.load(tmp_path / "pipeline")
    assert len(loaded.get_pipe("elmo").runner.token_cache) == len(set(vocab[:20]))
    doc = loaded(" ".join(sentences[0]))
    assert_float32_close(doc._.elmo_layers, docs[0]._.elmo_layers)


def test_token_cache_without_a_vocabulary_fills_from_the_text(fixture_files, fixture_bilm):
    """Released models ship no vocabulary: the cache starts empty and keeps the words it sees."""
    options, weights = fixture_files
    nlp = spacy.blank("en")
    elmo = nlp.add_pipe(
        "elmo",
        config={"model": {"options_file": str(options), "weight_file": str(weights), "token_cache_words": 10}},
    )
    nlp.initialize()
    assert len(elmo.runner.token_cache) == 0
    for _ in range(2):
        doc = nlp("The bank raised its rates .")
        assert_float32_close(doc._.elmo_layers, _layers(fixture_bilm, [t.text for t in doc]))
    assert len(elmo.runner.token_cache) == 8 and elmo.runner.token_cache.hits == 8  # 6 words, <S>, </S>


def test_a_missing_token_cache_vocab_names_the_file(tmp_path, fixture_files):
    options, weights = fixture_files
    nlp = spacy.blank("en")
    nlp.add_pipe(
        "elmo",
        config={"model": {"options_file": str(options), "weight_file": str(weights), "token_cache_words": 10,
                          "token_cache_vocab": str(tmp_path / "vocab.txt")}},
    )
    with pytest.raises(ValueError, match="token_cache_vocab: .*vocab.txt does not exist"):
        nlp.initialize()


def test_bf16_precision_is_close_to_fp32(nlp, fixture_files, sentences):
    options, weights = fixture_files
    fast = spacy.blank("en")
    fast.add_pipe("elmo", config={"model": {"options_file": str(options), "weight_file": str(weights), "precision": "bf16"}})
    for words in sentences:
        exact, approx = nlp(" ".join(words))._.elmo, fast(" ".join(words))._.elmo
        assert approx.dtype == np.float32
        cosine = (exact * approx).sum(-1) / np.linalg.norm(exact, axis=-1) / np.linalg.norm(approx, axis=-1)
        assert cosine.min() > 0.995 and np.abs(exact - approx).max() > 0
    with pytest.raises(ConfigValidationError, match="precision"):
        spacy.blank("en").add_pipe("elmo", config={"model": {"precision": "fp8"}})
