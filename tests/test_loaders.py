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

CONFIG = f"""
[nlp]
lang = "en"
pipeline = ["elmo"]

[components]

[components.elmo]
factory = "elmo"

[initialize]

[initialize.components]

[initialize.components.elmo]

[initialize.components.elmo.weights]
@misc = "spacy_elmo.WeightLoader.v2"
weights = "{ELMO_FIXTURE}"
"""


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
