"""Weights that enter at ``initialize`` through the registered loader
(``spacy_elmo.WeightLoader.v2``): the pipe's own config then holds no paths."""

from __future__ import annotations

import numpy as np
import pytest
import spacy
import torch
from thinc.api import Config

from conftest import ELMO_FIXTURE
from spacy_elmo import batch_to_ids

#: The weights as users give them to ``spacy train``: the loader in the initialize block.
INITIALIZE_BLOCK = f"""
[initialize]

[initialize.components]

[initialize.components.elmo]

[initialize.components.elmo.weights]
@misc = "spacy_elmo.WeightLoader.v2"
weights = "{ELMO_FIXTURE}"
"""

CONFIG = """
[nlp]
lang = "en"
pipeline = ["elmo"]

[components]

[components.elmo]
factory = "elmo"

""" + INITIALIZE_BLOCK


def test_weights_come_from_the_initialize_block(tmp_path, fixture_bilm):
    nlp = spacy.util.load_model_from_config(Config().from_str(CONFIG), auto_fill=True)
    nlp.initialize()
    words = ["Weights", "at", "initialize", "."]
    doc = nlp(" ".join(words))
    with torch.no_grad():
        expected, _ = fixture_bilm(torch.from_numpy(batch_to_ids([words])))
    np.testing.assert_allclose(doc._.elmo_layers, expected[:, 0].numpy(), atol=1e-6)

    model = nlp.config["components"]["elmo"]["model"]
    assert model["weights"] is model["options_file"] is model["weight_file"] is None
    nlp.to_disk(tmp_path / "pipeline")
    assert str(ELMO_FIXTURE) not in (tmp_path / "pipeline" / "elmo" / "cfg").read_text()
    restored = spacy.load(tmp_path / "pipeline")
    np.testing.assert_array_equal(restored(" ".join(words))._.elmo_layers, doc._.elmo_layers)


def test_loader_settings_are_checked_when_the_config_is_resolved():
    bad = CONFIG.replace(f'weights = "{ELMO_FIXTURE}"', 'weight_file = "w.hdf5"')
    nlp = spacy.util.load_model_from_config(Config().from_str(bad), auto_fill=True)
    with pytest.raises(ValueError, match="options_file is missing"):
        nlp.initialize()


TRAIN_CONFIG = """
[paths]
train = null
dev = null

[nlp]
lang = "en"
pipeline = ["elmo", "tagger"]

[components]

[components.elmo]
factory = "elmo"
frozen = true

[components.tagger]
factory = "tagger"

[components.tagger.model]
@architectures = "spacy.Tagger.v2"

[components.tagger.model.tok2vec]
@architectures = "spacy_elmo.ElmoListener.v1"
width = 8

[corpora]

[corpora.train]
@readers = "spacy.Corpus.v1"
path = ${paths.train}

[corpora.dev]
@readers = "spacy.Corpus.v1"
path = ${paths.dev}

[training]
seed = 0
gpu_allocator = null
max_steps = 2
eval_frequency = 2

""" + INITIALIZE_BLOCK


def test_spacy_train_reads_the_weights_of_the_initialize_block(tmp_path, fixture_bilm):
    """spaCy's own training (``spacy train``'s function) initializes the frozen-by-setting elmo
    pipe with the loader, trains the tagger on its layers, and saves a pipeline that carries
    those weights (the fixture model's shape, not the bundled model's)."""
    from spacy.cli.train import train
    from spacy.tokens import DocBin

    nlp = spacy.blank("en")
    docs = DocBin()
    for text, tags in [("I like eggs", ["N", "V", "N"]), ("Eat ham", ["V", "N"])]:
        doc = nlp.make_doc(text)
        for token, tag in zip(doc, tags):
            token.tag_ = tag
        docs.add(doc)
    docs.to_disk(tmp_path / "train.spacy")
    (tmp_path / "config.cfg").write_text(TRAIN_CONFIG, encoding="utf-8")
    paths = {"paths.train": str(tmp_path / "train.spacy"), "paths.dev": str(tmp_path / "train.spacy")}
    train(tmp_path / "config.cfg", tmp_path / "out", overrides=paths)
    trained = spacy.load(tmp_path / "out" / "model-last")
    assert trained.get_pipe("elmo").bilm.options == fixture_bilm.options
    assert trained("I like ham")._.elmo.shape == (3, 2 * fixture_bilm.options.lstm.projection_dim)
