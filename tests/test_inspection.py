"""``python -m spacy_elmo inspect``: the layer mix each listener learned, read from a saved
pipeline, checked against the mix heads' own parameters (softmax of ``s``, and ``gamma``)."""

from __future__ import annotations

import json

import numpy as np
import spacy
from spacy.training import Example
from thinc.api import Adam, fix_random_seed
from typer.testing import CliRunner

from conftest import ELMO_FIXTURE
from spacy_elmo.cli import app
from spacy_elmo.cli.inspect import MIX_HEAD, listener_mixes

ELMO = {"model": {"options_file": str(ELMO_FIXTURE / "options.json"), "weight_file": str(ELMO_FIXTURE / "lm_weights.hdf5")}}
LISTENER = {"@architectures": "spacy_elmo.ElmoListener.v1", "width": 16, "dropout": 0.0}
DATA = [("I like green eggs", ["N", "V", "J", "N"]), ("Eat blue ham", ["V", "J", "N"])]


def _trained_pipeline(tmp_path):
    fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config=ELMO)
    nlp.add_pipe("tagger", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": LISTENER}})
    nlp.add_pipe("tagger", name="tagger2", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": {**LISTENER, "layer_norm": True}}})
    examples = [Example.from_dict(nlp.make_doc(t), {"tags": tags}) for t, tags in DATA]
    optimizer = nlp.initialize(lambda: examples, sgd=Adam(0.05))
    for _ in range(15):
        nlp.update(examples, sgd=optimizer)
    nlp.to_disk(tmp_path / "pipeline")
    return nlp


def _expected(nlp, name):
    head = next(node for node in nlp.get_pipe(name).model.walk() if node.name == MIX_HEAD)
    s = head.get_param("s").astype(np.float64)
    return np.exp(s) / np.exp(s).sum(), float(head.get_param("gamma")[0])


def test_inspect_reads_each_listeners_learned_mix(tmp_path, matplotlib):
    nlp = _trained_pipeline(tmp_path)
    result = CliRunner().invoke(
        app, ["inspect", str(tmp_path / "pipeline"), "--output", str(tmp_path / "mix.json"), "--plot", str(tmp_path / "mix.png")]
    )
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "mix.json").read_text())
    assert [r["component"] for r in rows] == ["tagger", "tagger2"]
    for row in rows:
        weights, gamma = _expected(nlp, row["component"])
        np.testing.assert_allclose(row["weights"], weights, atol=1e-6)
        assert abs(row["gamma"] - gamma) < 1e-6
        assert abs(sum(row["weights"]) - 1) < 1e-6
        # trained, not the equal mix it started from
        assert np.ptp(row["weights"]) > 1e-4
    assert [r["layer_norm"] for r in rows] == [False, True]
    assert "token layer" in result.output and "LSTM layer 2" in result.output
    assert (tmp_path / "mix.png").stat().st_size > 1000


def test_inspect_after_replace_listeners_reads_the_embedders(tmp_path):
    nlp = _trained_pipeline(tmp_path)
    before = {m.component: m.weights for m in listener_mixes(nlp)}
    nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])
    after = {m.component: m.weights for m in listener_mixes(nlp)}
    assert after == before


def test_inspect_refuses_a_pipeline_without_listeners(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config=ELMO)
    nlp.initialize()
    nlp.to_disk(tmp_path / "pipeline")
    result = CliRunner().invoke(app, ["inspect", str(tmp_path / "pipeline")])
    assert result.exit_code == 1 and "no component reads ELMo" in result.output
    result = CliRunner().invoke(app, ["inspect", str(tmp_path / "nowhere")])
    assert result.exit_code == 1 and "pipeline directory not found" in result.output


def test_inspect_takes_several_pipelines_and_names_each_ones_components(tmp_path):
    """A tagger's and an NER's model-best are two pipelines: one table; the same component name
    in both is told apart by its pipeline."""
    nlp = _trained_pipeline(tmp_path)
    other = tmp_path / "copy"
    other.mkdir()
    nlp.to_disk(other / "pipeline")
    result = CliRunner().invoke(
        app, ["inspect", str(tmp_path / "pipeline"), str(other / "pipeline"), "--output", str(tmp_path / "mix.json")]
    )
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "mix.json").read_text())
    assert [r["component"] for r in rows] == [
        f"tagger ({tmp_path / 'pipeline'})", f"tagger2 ({tmp_path / 'pipeline'})",
        f"tagger ({other / 'pipeline'})", f"tagger2 ({other / 'pipeline'})",
    ]
    assert rows[0]["weights"] == rows[2]["weights"]  # the same trained pipeline, saved twice
