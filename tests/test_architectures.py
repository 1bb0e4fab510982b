"""The registered Thinc model around the biLM: registry lookups, outputs, bytes, devices."""

import numpy as np
import pytest
import spacy
import torch
from thinc.api import Config, CupyOps, NumpyOps, set_current_ops

from conftest import make_options, write_random_bilm_tf
from spacy_elmo import batch_to_ids, load_bilm
from spacy_elmo.architectures import elmo_model_v1, elmo_model_v2
from spacy_elmo.layers.bilm_model import bilm_settings, get_bilm, set_bilm

SENTENCES = [["The", "bank", "of", "the", "river", "."], ["Money", "!"], ["x"]]


def _reference_layers(bilm, sentences):
    """Each sentence alone through the PyTorch biLM: (n_layers + 1, n_tokens, width)."""
    with torch.no_grad():
        return [bilm(torch.from_numpy(batch_to_ids([s])))[0][:, 0].numpy() for s in sentences]


@pytest.fixture
def elmo_model(fixture_files):
    model = elmo_model_v2()
    set_bilm(model, load_bilm(*fixture_files))
    return model


def test_architecture_resolves_from_a_config_block():
    config = Config().from_str('[model]\n@architectures = "spacy_elmo.ElmoModel.v2"\nprecision = "bf16"\nthreads = 2\n')
    model = spacy.registry.resolve(config)["model"]
    assert model.name == "elmo"
    assert get_bilm(model) is None
    assert bilm_settings(model).precision == "bf16" and bilm_settings(model).threads == 2
    assert spacy.registry.architectures.get("spacy_elmo.ElmoModel.v2") is elmo_model_v2
    assert spacy.registry.architectures.get("spacy_elmo.ElmoModel.v1") is elmo_model_v1
    assert spacy.registry.find("architectures", "spacy_elmo.ElmoModel.v2")["module"] == "spacy_elmo.architectures"


def test_settings_are_checked_when_the_block_resolves():
    config = Config().from_str('[model]\n@architectures = "spacy_elmo.ElmoModel.v2"\nprecision = "int4"\n')
    with pytest.raises(ValueError, match="ElmoModel.v2: precision must be one of"):
        spacy.registry.resolve(config)


def test_settings_come_from_the_config_not_from_the_bytes(fixture_files):
    """A saved model's bytes hold its weights; its settings are the config's, so an override at
    load time (spacy.load(..., config=...)) takes effect."""
    model = elmo_model_v2(precision="bf16")
    set_bilm(model, load_bilm(*fixture_files))
    restored = elmo_model_v2(precision="fp32").from_bytes(model.to_bytes())
    assert bilm_settings(restored).precision == "fp32"


def test_factory_is_found_through_its_entry_point():
    spacy.blank("en")  # a Language imports the modules named by spacy_factories entry points
    assert spacy.registry.find("factories", "elmo")["module"] == "spacy_elmo.pipe"
    meta = spacy.Language.get_factory_meta("elmo")
    assert {"doc._.elmo", "doc._.elmo_layers", "token._.elmo", "span._.elmo"} <= set(meta.assigns)
    assert meta.default_config["model"]["@architectures"] == "spacy_elmo.ElmoModel.v2"


def test_outputs_are_the_bilm_layers_of_each_sequence(elmo_model, fixture_bilm):
    outputs = elmo_model.predict(SENTENCES)
    assert [o.shape for o in outputs] == [(3, len(s), 32) for s in SENTENCES]
    assert all(o.dtype == np.float32 for o in outputs)
    for output, expected in zip(outputs, _reference_layers(fixture_bilm, SENTENCES)):
        np.testing.assert_allclose(output, expected, atol=1e-6)
    assert elmo_model.get_dim("nO") == 32


def test_bytes_carry_options_and_weights(tmp_path):
    """A model of another shape restores into a bare architecture: the options travel along."""
    options, weights = write_random_bilm_tf(tmp_path, make_options(n_layers=3, projection_dim=5))
    model = elmo_model_v2()
    set_bilm(model, load_bilm(options, weights))
    restored = elmo_model_v2().from_bytes(model.to_bytes())
    assert get_bilm(restored).options == get_bilm(model).options
    assert restored.get_dim("nO") == 10
    for a, b in zip(model.predict(SENTENCES), restored.predict(SENTENCES)):
        assert a.shape == (4, a.shape[1], 10)
        np.testing.assert_array_equal(a, b)


def test_a_model_without_weights_says_so():
    model = elmo_model_v2()
    with pytest.raises(ValueError, match="no weights yet"):
        model.predict([["a"]])
    assert elmo_model_v2().from_bytes(model.to_bytes()).shims[0]._model is None


def test_gradients_reach_the_bilm(elmo_model):
    """Not used by the frozen pipe, but what a fine-tuning listener will rely on."""
    outputs, backprop = elmo_model.begin_update(SENTENCES[:2])
    backprop([np.ones_like(o) for o in outputs])
    bilm = get_bilm(elmo_model)
    assert float(bilm.token_encoder.projection.weight.grad.abs().sum()) > 0
    assert float(bilm.backward_lstm.layers[1].weight_hh_l0.grad.abs().sum()) > 0


def test_gpu_ops_without_a_cuda_torch_fail_clearly(fixture_bilm):
    """spaCy told to use a GPU (CuPy ops, as after spacy.require_gpu()) that PyTorch cannot
    see: a clear error, not an assertion deep inside torch."""
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    model = elmo_model_v2()
    set_current_ops(CupyOps())
    try:
        with pytest.raises(ValueError, match="GPU.*no CUDA device"):
            elmo_model_v2()
        with pytest.raises(ValueError, match="GPU.*no CUDA device"):
            set_bilm(model, fixture_bilm)
    finally:
        set_current_ops(NumpyOps())


V1_PIPELINE_CONFIG = """
[nlp]
lang = "en"
pipeline = ["elmo"]

[components]

[components.elmo]
factory = "elmo"
model_path = "{model}"
model_name = null
options_file = null
weight_file = null
mix_weights = [0, 1, 1]
gamma = 1.0
max_sequence_length = 256
max_batch_tokens = 64
store_layers = true
set_vector_hooks = true
threads = 1
frozen = true
cache_size_mb = 512
precision = "bf16"
token_cache_words = 0
token_cache_vocab = null

[components.elmo.model]
@architectures = "spacy_elmo.ElmoModel.v1"
"""


def test_a_v1_pipeline_config_still_loads_with_its_pipe_level_settings(fixture_files):
    """Configs written before the settings moved into ElmoModel.v2 (pipe-level keys, an
    ElmoModel.v1 block) still build, with a deprecation warning, and give the v2 pipe's vectors."""
    directory = fixture_files[0].parent
    with pytest.warns(DeprecationWarning, match="ElmoModel.v1"):
        old = spacy.util.load_model_from_config(
            Config().from_str(V1_PIPELINE_CONFIG.format(model=directory)), auto_fill=True
        )
    settings = old.get_pipe("elmo").settings
    assert (settings.weights, settings.precision, settings.max_batch_tokens) == (str(directory), "bf16", 64)
    new = spacy.blank("en")
    new.add_pipe("elmo", config={"model": {"weights": str(directory), "precision": "bf16", "max_batch_tokens": 64}, "mix_weights": [0, 1, 1]})
    text = "The old config still works ."
    np.testing.assert_array_equal(old(text)._.elmo, new(text)._.elmo)


def test_v1_keys_beside_a_v2_model_say_where_they_went():
    with pytest.raises(ValueError, match=r"precision, threads belong to the biLM's model block: set them in \[components.elmo.model\]"):
        spacy.blank("en").add_pipe("elmo", config={"precision": "bf16", "threads": 2})


@pytest.mark.parametrize("key, value", [
    ("weights", "small"), ("model_name", "small"), ("model_path", "/models/elmo"), ("options_file", "o.json"),
    ("weight_file", "w.hdf5"), ("precision", "int8"), ("max_sequence_length", 128), ("max_batch_tokens", 1024),
    ("threads", 2), ("token_cache_words", 100), ("token_cache_vocab", "vocab.txt"),
])  # fmt: skip
def test_every_model_key_on_the_pipe_gets_the_hint(key, value):
    """Each of the model block's settings, put on the pipe by mistake or by an old config, is
    refused with the hint naming the block (not spaCy's bare 'unexpected argument')."""
    with pytest.raises(ValueError, match=rf"'elmo': {key} belongs to the biLM's model block: set it in \[components.elmo.model\]"):
        spacy.blank("en").add_pipe("elmo", config={key: value})


def test_the_pipe_config_holds_the_live_keys_and_the_model_keys_as_null(tmp_path):
    """What a new pipeline's config holds: the pipe's own settings, the model block, and the
    model's keys on the pipe as null (kept so that old configs load: MODEL_KEYS_ON_THE_PIPE), also
    after saving and loading."""
    from spacy_elmo.pipe import DEFAULT_CONFIG, MODEL_KEYS_ON_THE_PIPE

    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    live = set(DEFAULT_CONFIG["elmo"]) | {"factory"}
    for config in (nlp.config, spacy.util.load_config_from_str(nlp.config.to_str())):
        pipe = config["components"]["elmo"]
        assert set(pipe) == live | set(MODEL_KEYS_ON_THE_PIPE)
        assert all(pipe[key] is None for key in MODEL_KEYS_ON_THE_PIPE)
        assert pipe["model"]["@architectures"] == "spacy_elmo.ElmoModel.v2"
