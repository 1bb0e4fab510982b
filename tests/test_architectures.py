"""The registered Thinc model around the biLM: registry lookups, outputs, bytes, devices."""

import numpy as np
import pytest
import spacy
import torch
from thinc.api import Config, ConfigValidationError, CupyOps, NumpyOps, set_current_ops

from conftest import assert_float32_close, make_options, write_random_bilm_tf
from spacy_elmo import batch_to_ids, load_bilm
from spacy_elmo.architectures import elmo_model_v2
from spacy_elmo.layers.bilm_model import BiLMShim, bilm_settings, get_runner, set_bilm

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
    assert get_runner(model) is None
    assert bilm_settings(model).precision == "bf16" and bilm_settings(model).threads == 2
    assert spacy.registry.architectures.get("spacy_elmo.ElmoModel.v2") is elmo_model_v2
    for gone in ("spacy_elmo.ElmoModel.v1", "spacy_elmo.ElmoEmbedder.v1"):
        assert not spacy.registry.has("architectures", gone)
    assert not spacy.registry.has("misc", "spacy_elmo.WeightLoader.v1")
    assert spacy.registry.find("architectures", "spacy_elmo.ElmoModel.v2")["module"] == "spacy_elmo.architectures"


def test_settings_are_checked_when_the_block_resolves():
    """Declared once, in the registered function's signature: the registry checks their types,
    the function their bounds, in the one wording of every setting of the package."""
    config = Config().from_str('[model]\n@architectures = "spacy_elmo.ElmoModel.v2"\nprecision = "int4"\n')
    with pytest.raises(ConfigValidationError, match="precision"):
        spacy.registry.resolve(config)
    config["model"].update(precision="fp32", max_batch_tokens=0)
    with pytest.raises(ValueError, match=r"^spacy_elmo.ElmoModel.v2: max_batch_tokens must be >= 1, got 0$"):
        spacy.registry.resolve(config)
    with pytest.raises(ValueError, match=r"^spacy_elmo.ElmoModel.v2: precision must be 'fp32', 'bf16', 'fp16' or 'int8', got 'int4'$"):
        elmo_model_v2(precision="int4")


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
        assert_float32_close(output, expected)
    assert elmo_model.get_dim("nO") == 32


def test_bytes_carry_options_and_weights(tmp_path):
    """A model of another shape restores into a bare architecture: the options travel along."""
    options, weights = write_random_bilm_tf(tmp_path, make_options(n_layers=3, projection_dim=5))
    model = elmo_model_v2()
    set_bilm(model, load_bilm(options, weights))
    restored = elmo_model_v2().from_bytes(model.to_bytes())
    assert get_runner(restored).bilm.options == get_runner(model).bilm.options
    assert restored.get_dim("nO") == 10
    for a, b in zip(model.predict(SENTENCES), restored.predict(SENTENCES)):
        assert a.shape == (4, a.shape[1], 10)
        np.testing.assert_array_equal(a, b)


def test_a_model_without_weights_says_so():
    model = elmo_model_v2()
    with pytest.raises(ValueError, match="no weights yet"):
        model.predict([["a"]])
    assert get_runner(elmo_model_v2().from_bytes(model.to_bytes())) is None


def test_the_shim_holds_one_runner_that_runs_and_receives_the_weights(elmo_model, fixture_files):
    """BiLMShim.runner is the module the shim runs, for the model's life: from_bytes loads the
    weights into it rather than replacing it, and a copy copies both as one."""
    shim = elmo_model.shims[0]
    assert isinstance(shim, BiLMShim)
    calls = []
    shim.runner.register_forward_hook(lambda *_: calls.append(1))
    elmo_model.predict(SENTENCES)
    assert calls == [1]
    bare = elmo_model_v2()
    runner = bare.shims[0].runner
    assert get_runner(bare) is None and runner.bilm is None
    bare.from_bytes(elmo_model.to_bytes())
    assert bare.shims[0].runner is runner and get_runner(bare) is runner
    assert runner.bilm.options == shim.runner.bilm.options
    copy = elmo_model.copy()
    assert copy.shims[0].runner is not shim.runner
    copy.predict(SENTENCES)
    assert calls == [1, 1]  # the copied runner carries the copied hook: the same module the shim runs


def test_gradients_reach_the_bilm(elmo_model):
    """Not used by the frozen pipe, but what a fine-tuning listener will rely on."""
    outputs, backprop = elmo_model.begin_update(SENTENCES[:2])
    backprop([np.ones_like(o) for o in outputs])
    bilm = get_runner(elmo_model).bilm
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


V1_KEYS = ("model_name", "model_path", "weights", "options_file", "weight_file", "precision",
           "max_sequence_length", "max_batch_tokens", "threads", "token_cache_words", "token_cache_vocab")


def test_a_saved_config_holds_only_keys_that_do_something(tmp_path):
    """config.cfg of a saved pipeline: the pipe's own settings and its model block, nothing of
    the first version's pipe-level keys; such a key on the pipe is spaCy's own config error."""
    from spacy_elmo.pipe import DEFAULT_CONFIG

    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.initialize()
    nlp.to_disk(tmp_path / "pipeline")
    saved = Config().from_disk(tmp_path / "pipeline" / "config.cfg")
    pipe = saved["components"]["elmo"]
    assert set(pipe) == set(DEFAULT_CONFIG["elmo"]) | {"factory"}
    assert not set(V1_KEYS) & set(pipe)
    assert set(pipe["model"]) == set(DEFAULT_CONFIG["elmo"]["model"])
    with pytest.raises(ConfigValidationError, match="model_path"):
        spacy.blank("en").add_pipe("elmo", config={"model_path": "/models/elmo"})
