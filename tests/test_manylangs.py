"""ELMoForManyLangs model directories: parity with its own code, the lexicon ids, the elmo pipe,
bad directories, and conversion to a native checkpoint.

The fixture ``fixtures/manylangs_tiny`` is a random model in ELMoForManyLangs' exact layout,
written by ``fixtures/make_manylangs_tiny.py``.
"""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest
import spacy
import torch
from spacy.training import Example
from thinc.api import Adam, fix_random_seed
from typer.testing import CliRunner

from conftest import FIXTURES
from spacy_elmo import export_bilm_tf, load_bilm, save_bilm
from spacy_elmo.cli import app
from spacy_elmo.formats import WeightFileError
from spacy_elmo.formats.manylangs import ManyLangsFormatError, is_manylangs_dir
from spacy_elmo.indexers import LexiconError

MODEL = FIXTURES / "manylangs_tiny"
WIDTH = 12  # 2 * projection_dim of the fixture
#: German with umlauts and ß, Chinese, Russian, Arabic; "☃" and "Ж" are not in the char lexicon,
#: the long word is cut to 10 characters, "" and "\u3000" are tokens of their own.
SENTENCES = [
    ["die", "Straße", "ist", "schön", "."],
    ["我们", "喜欢", "自然语言处理", "。"],
    ["Привет", ",", "мир", "Ж", "!"],
    ["مرحبا", "بالعالم"],
    ["Überschwänglichkeitsgefühl", "x☃y", "", "\u3000"],
]


def _layers(bilm, sentences):
    with torch.no_grad():
        layers, _ = bilm(torch.from_numpy(bilm.batch_to_ids(sentences)))
    return [layers[:, i, : len(words)].numpy() for i, words in enumerate(sentences)]


@pytest.fixture(scope="module")
def bilm():
    return load_bilm(MODEL)


@pytest.fixture
def model_copy(tmp_path):
    shutil.copytree(MODEL, tmp_path / "model")
    return tmp_path / "model"


def test_every_layer_matches_elmoformanylangs(bilm):
    """Expected values: ELMoForManyLangs' own Embedder (pip package ``elmoformanylangs``) on the
    same directory; ``output_layer=-2`` returns all its layers. A fresh Embedder starts from zero
    LSTM states (it is stateful across calls), like this package's stateless biLM."""
    try:
        from elmoformanylangs import Embedder
    except ImportError as err:  # the reason says which import failed, not just that one did
        pytest.skip(f"the parity reference elmoformanylangs does not import ({err}): pip install -e '.[test]'")

    logging.getLogger("elmoformanylangs").setLevel(logging.WARNING)
    expected = Embedder(str(MODEL)).sents2elmo(SENTENCES, output_layer=-2)
    got = _layers(bilm, SENTENCES)
    for want, have in zip(expected, got):
        assert want.shape == have.shape == (3, have.shape[1], WIDTH)
        np.testing.assert_allclose(have, want, atol=1e-5, rtol=0)
    assert max(np.abs(e).max() for e in expected) > 0.1  # not trivially zero


def test_lexicon_ids_follow_elmoformanylangs(bilm):
    """Written out by hand from char.dic / word.dic (ids + 1; 0 marks padded positions)."""
    chars = {}
    for line in (MODEL / "char.dic").read_text(encoding="utf-8").splitlines():
        entry, i = line.split("\t")
        chars[entry if entry.strip() else "\u3000"] = int(i) + 1
    words = dict(
        (w, int(i) + 1)
        for w, i in (line.split("\t") for line in (MODEL / "word.dic").read_text(encoding="utf-8").splitlines())
    )
    ids = bilm.batch_to_ids([["Straße", "Ж"], ["\u3000"]])
    assert ids.shape == (2, 2, 12 + 1)
    first, last, pad = chars["<eow>"], chars["<bow>"], chars["<pad>"]  # ELMoForManyLangs' swap
    straße = [first] + [chars[c] for c in "Straße"] + [last] + [pad] * 4 + [words["Straße"]]
    unknown = [first, chars["<oov>"], last] + [pad] * 9 + [words["<oov>"]]
    space = [first, chars["\u3000"], last] + [pad] * 9 + [words["<oov>"]]
    assert ids[0].tolist() == [straße, unknown]
    assert ids[1].tolist() == [space, [0] * 13]
    long = bilm.batch_to_ids([["abcdefghijklmn"]])[0, 0]
    assert long[1:11].tolist() == [chars[c] for c in "abcdefghij"] and long[11] == last
    assert bilm.indexer.bos_ids.tolist()[:3] == [first, chars["<bos>"], last]


def test_word_embedding_changes_the_token_layer(bilm):
    """'die' and 'ist' are in word.dic: their word rows are part of layer 0."""
    before = _layers(bilm, [["die"]])[0][0]
    changed = load_bilm(MODEL)
    with torch.no_grad():
        changed.token_encoder.word_embedding.weight[1:] += 1.0
    assert np.abs(_layers(changed, [["die"]])[0][0] - before).max() > 1e-3


# The elmo pipe


@pytest.mark.parametrize("lang", ["de", "zh"])
def test_pipe_with_a_blank_pipeline_of_the_language(lang, bilm):
    if lang == "zh":  # spaCy's Chinese default segmenter is per character; ours are words
        nlp = spacy.blank("zh")
        words = SENTENCES[1]
        doc = spacy.tokens.Doc(nlp.vocab, words=words)
    else:
        nlp = spacy.blank("de")
        words = SENTENCES[0]
        doc = nlp.make_doc("die Straße ist schön.")
        assert [t.text for t in doc] == words
    nlp.add_pipe("elmo", config={"model": {"weights": str(MODEL)}})
    doc = nlp(doc)
    assert doc._.elmo_layers.shape == (3, len(words), WIDTH)
    np.testing.assert_allclose(doc._.elmo_layers, _layers(bilm, [words])[0], atol=1e-6)
    assert doc[1].vector.shape == (WIDTH,)


def test_pipeline_saved_and_loaded_without_the_model_directory(tmp_path, model_copy):
    nlp = spacy.blank("de")
    nlp.add_pipe("elmo", config={"model": {"weights": str(model_copy)}})
    text = "die Straße ist schön."
    expected = nlp(text)._.elmo_layers
    nlp.to_disk(tmp_path / "pipeline")
    shutil.rmtree(model_copy)
    loaded = spacy.load(tmp_path / "pipeline")
    np.testing.assert_array_equal(loaded(text)._.elmo_layers, expected)
    restored = spacy.util.load_model_from_config(nlp.config)  # spaCy's way to restore from bytes
    restored.from_bytes(nlp.to_bytes())
    np.testing.assert_array_equal(restored(text)._.elmo_layers, expected)


def test_listener_tagger_learns_on_a_frozen_manylangs_elmo():
    fix_random_seed(0)
    nlp = spacy.blank("de")
    nlp.add_pipe("elmo", config={"model": {"weights": str(MODEL)}, "frozen": True})
    listener = {"@architectures": "spacy_elmo.ElmoListener.v1", "width": 16, "dropout": 0.0}
    nlp.add_pipe("tagger", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": listener}})
    data = [("die Straße ist schön", ["D", "N", "V", "A"]), ("Привет мир", ["I", "N"])]
    exs = [Example.from_dict(nlp.make_doc(text), {"tags": tags}) for text, tags in data]
    optimizer = nlp.initialize(lambda: exs, sgd=Adam(0.01))
    losses = []
    for _ in range(40):
        step = {}
        nlp.update(exs, sgd=optimizer, losses=step)
        losses.append(step["tagger"])
    assert losses[-1] < 0.5 * losses[0]
    assert [t.tag_ for t in nlp("die Straße ist schön")] == ["D", "N", "V", "A"]


def test_token_cache_gives_the_same_layers(model_copy, bilm):
    (model_copy / "vocab.txt").write_text("die\nStraße\nмир\n", encoding="utf-8")
    nlp = spacy.blank("de")
    nlp.add_pipe("elmo", config={"model": {"weights": str(model_copy), "token_cache_words": 3}})
    doc = nlp("die Straße ist schön.")
    assert len(nlp.get_pipe("elmo").runner.token_cache) == 3
    np.testing.assert_allclose(doc._.elmo_layers, _layers(bilm, [SENTENCES[0]])[0], atol=1e-6)


def test_embed_command(tmp_path):
    (tmp_path / "in.txt").write_text("die Straße ist schön .\nПривет , мир !\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--weights", str(MODEL)])
    assert result.exit_code == 0, result.output
    import h5py

    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        assert f["1"].shape == (3, 4, WIDTH)


# Bad and partial directories


@pytest.mark.parametrize("name", ["config.json", "tiny.json", "char.dic", "word.dic", "token_embedder.pkl", "encoder.pkl"])
def test_each_missing_file_is_named(model_copy, name):
    (model_copy / name).unlink()
    assert is_manylangs_dir(model_copy)
    with pytest.raises(FileNotFoundError, match=name.replace(".", r"\.")):
        load_bilm(model_copy)
    nlp = spacy.blank("de")
    nlp.add_pipe("elmo", config={"model": {"weights": str(model_copy)}})
    with pytest.raises(FileNotFoundError, match="elmo pipe 'elmo': .*" + name.replace(".", r"\.")):
        nlp.initialize()


def test_released_config_name_needs_no_config_file(model_copy):
    """The released models name a config that ships in the elmoformanylangs package."""
    (model_copy / "config.json").write_text(json.dumps({"config_path": "../configs/cnn_50_100_512_4096_sample.json"}))
    (model_copy / "tiny.json").unlink()
    # the released shapes (50-dim characters) do not fit the tiny weights
    with pytest.raises(WeightFileError, match=r"token_embedder\.pkl: parameter 'char_emb_layer\.embedding\.weight' has shape \(74, 4\).*needs \(74, 50\)"):
        load_bilm(model_copy)


@pytest.mark.parametrize(
    "file, content, error, message",
    [
        ("config.json", "{not json", ManyLangsFormatError, r"config\.json: not valid JSON"),
        ("config.json", "{}", ManyLangsFormatError, "missing 'config_path'"),
        ("char.dic", "<bos>\t0\n<eos>\t1\n", LexiconError, r"char\.dic: missing the special entries \['<oov>'"),
        ("char.dic", "a\tb\n", LexiconError, r"char\.dic:1: expected 'entry<TAB>id'"),
        ("word.dic", "<oov>\t0\n<pad>\t7\n", LexiconError, r"word\.dic: ids must lie in \[0, 2\)"),
        ("encoder.pkl", "garbage", WeightFileError, r"encoder\.pkl: not a PyTorch state dict"),
    ],
)
def test_malformed_files_are_named(model_copy, file, content, error, message):
    (model_copy / file).write_text(content, encoding="utf-8")
    with pytest.raises(error, match=message):
        load_bilm(model_copy)


def test_mismatched_weights_and_unsupported_variants(model_copy):
    state = torch.load(model_copy / "encoder.pkl")
    state["forward_layer_2.input_linearity.weight"] = torch.zeros(1)
    torch.save(state, model_copy / "encoder.pkl")
    with pytest.raises(WeightFileError, match=r"encoder\.pkl: parameters the architecture config does not account for"):
        load_bilm(model_copy)
    config = json.loads((model_copy / "tiny.json").read_text())
    config["encoder"]["name"] = "lstm"
    (model_copy / "tiny.json").write_text(json.dumps(config))
    with pytest.raises(ManyLangsFormatError, match=r"tiny\.json: encoder\.name must be 'elmo' \(the released models' architecture"):
        load_bilm(model_copy)


def _edit_architecture(model_copy, **token_embedder):
    config = json.loads((model_copy / "tiny.json").read_text())
    config["token_embedder"].update(token_embedder)
    (model_copy / "tiny.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
    "edit, message",
    [
        # the highways are 16 wide with these filters, 16 + 4 with the config's
        ({"filters": [[1, 4], [2, 4], [3, 12]]}, r"token_embedder\.pkl: parameter 'convolutions\.2\.weight' has shape \(8, 4, 3\).*needs \(12, 4, 3\)"),
        ({"char_dim": "4"}, r"tiny\.json: token_embedder\.char_dim must be a valid integer, got '4'"),
        ({"word_dim": None}, r"tiny\.json: token_embedder\.word_dim must be a valid integer, got None"),
        ({"max_characters_per_token": 2}, r"tiny\.json: token_embedder\.max_characters_per_token must be >= 3, got 2"),
        ({"max_characters_per_token": 5, "filters": [[1, 4], [2, 4], [6, 8]]}, r"filters\[2\] must be \[width <= 5"),
    ],
)
def test_architecture_and_weights_that_disagree_are_named(model_copy, edit, message):
    _edit_architecture(model_copy, **edit)
    with pytest.raises((WeightFileError, ManyLangsFormatError), match=message):
        load_bilm(model_copy)


def test_a_flattened_embedding_is_named_with_its_file_and_shape(model_copy):
    state = torch.load(model_copy / "token_embedder.pkl")
    state["char_emb_layer.embedding.weight"] = state["char_emb_layer.embedding.weight"].flatten()
    torch.save(state, model_copy / "token_embedder.pkl")
    with pytest.raises(WeightFileError, match=r"token_embedder\.pkl: parameter 'char_emb_layer\.embedding\.weight' has shape \(\d+,\)"):
        load_bilm(model_copy)


def test_a_native_checkpoint_with_a_config_json_beside_it_is_not_theirs(tmp_path, bilm):
    save_bilm(bilm, tmp_path / "native")
    (tmp_path / "native" / "config.json").write_text('{"my": "training notes"}')
    assert not is_manylangs_dir(tmp_path / "native")
    for want, have in zip(_layers(bilm, SENTENCES), _layers(load_bilm(tmp_path / "native"), SENTENCES)):
        np.testing.assert_array_equal(have, want)


# Conversion


def test_native_checkpoint_round_trip_keeps_the_lexicon(tmp_path, model_copy, bilm):
    save_bilm(load_bilm(model_copy), tmp_path / "native")
    shutil.rmtree(model_copy)
    options = json.loads((tmp_path / "native" / "options.json").read_text(encoding="utf-8"))
    assert options["lexicon"]["chars"]["ids"]["中"] >= 0 and options["char_cnn"]["word_dim"] == 3
    converted = load_bilm(tmp_path / "native")
    assert not is_manylangs_dir(tmp_path / "native")
    for want, have in zip(_layers(bilm, SENTENCES), _layers(converted, SENTENCES)):
        np.testing.assert_array_equal(have, want)
    with pytest.raises(ValueError, match="no bilm-tf layout"):
        export_bilm_tf(converted, tmp_path / "released")


def test_convert_command(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["convert", str(MODEL), str(tmp_path / "native")])
    assert result.exit_code == 0, result.output
    assert "(elmoformanylangs) ->" in result.output and "(native)" in result.output
    result = runner.invoke(app, ["convert", str(tmp_path / "native"), str(tmp_path / "tf")])
    assert result.exit_code == 1 and "native checkpoint only" in result.output


def test_native_options_must_agree_with_their_lexicon(tmp_path):
    save_bilm(load_bilm(MODEL), tmp_path / "native")
    options_file = tmp_path / "native" / "options.json"
    options = json.loads(options_file.read_text(encoding="utf-8"))
    options["char_cnn"]["n_characters"] = 262
    options_file.write_text(json.dumps(options), encoding="utf-8")
    with pytest.raises(ValueError, match=r"char_cnn\.n_characters must be \d+ \(from the lexicon\), got 262"):
        load_bilm(tmp_path / "native")
