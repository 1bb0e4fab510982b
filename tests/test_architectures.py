"""The registered Thinc model around the biLM: registry lookups, outputs, bytes, devices."""

import numpy as np
import pytest
import spacy
import torch
from thinc.api import Config, CupyOps, NumpyOps, set_current_ops

from conftest import make_options, write_random_bilm_tf
from spacy_elmo import batch_to_ids, load_bilm
from spacy_elmo.architectures import elmo_model_v1, get_bilm, set_bilm

SENTENCES = [["The", "bank", "of", "the", "river", "."], ["Money", "!"], ["x"]]


def _reference_layers(bilm, sentences):
    """Each sentence alone through the PyTorch biLM: (n_layers + 1, n_tokens, width)."""
    with torch.no_grad():
        return [bilm(torch.from_numpy(batch_to_ids([s])))[0][:, 0].numpy() for s in sentences]


@pytest.fixture
def elmo_model(fixture_files):
    model = elmo_model_v1()
    set_bilm(model, load_bilm(*fixture_files))
    return model


def test_architecture_resolves_from_a_config_block():
    config = Config().from_str('[model]\n@architectures = "spacy_elmo.ElmoModel.v1"\n')
    model = spacy.registry.resolve(config)["model"]
    assert model.name == "elmo"
    assert get_bilm(model) is None
    assert spacy.registry.architectures.get("spacy_elmo.ElmoModel.v1") is elmo_model_v1
    assert spacy.registry.find("architectures", "spacy_elmo.ElmoModel.v1")["module"] == "spacy_elmo.architectures"


def test_factory_is_found_through_its_entry_point():
    spacy.blank("en")  # a Language imports the modules named by spacy_factories entry points
    assert spacy.registry.find("factories", "elmo")["module"] == "spacy_elmo.pipe"
    meta = spacy.Language.get_factory_meta("elmo")
    assert {"doc._.elmo", "doc._.elmo_layers", "token._.elmo", "span._.elmo"} <= set(meta.assigns)
    assert meta.default_config["model"]["@architectures"] == "spacy_elmo.ElmoModel.v1"


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
    model = elmo_model_v1()
    set_bilm(model, load_bilm(options, weights))
    restored = elmo_model_v1().from_bytes(model.to_bytes())
    assert get_bilm(restored).options == get_bilm(model).options
    assert restored.get_dim("nO") == 10
    for a, b in zip(model.predict(SENTENCES), restored.predict(SENTENCES)):
        assert a.shape == (4, a.shape[1], 10)
        np.testing.assert_array_equal(a, b)


def test_a_model_without_weights_says_so():
    model = elmo_model_v1()
    with pytest.raises(ValueError, match="no weights yet"):
        model.predict([["a"]])
    assert elmo_model_v1().from_bytes(model.to_bytes()).shims[0]._model is None


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
    model = elmo_model_v1()
    set_current_ops(CupyOps())
    try:
        with pytest.raises(ValueError, match="GPU.*no CUDA device"):
            elmo_model_v1()
        with pytest.raises(ValueError, match="GPU.*no CUDA device"):
            set_bilm(model, fixture_bilm)
    finally:
        set_current_ops(NumpyOps())
