"""``spacy train`` of the project's ELMo-listener configs, run as a user runs them: subprocesses,
the bundled biLM, the project's demo slices of UD English-EWT and WNUT17. A tagger and an NER
train on ``--device`` (``--gpu-id 0`` on CUDA: Thinc's CuPy arrays and the biLM's PyTorch tensors
meet in the listener) and reload on the CPU; two tagger runs with the same seed give identical
weights and scores (CPU)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
import torch
from spacy.tokens import DocBin
from spacy.training.converters import conllu_to_docs

from conftest import checkout_pythonpath, gpu_id, project_script

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "project" / "demo_data"
#: component -> (the project's config, the score spaCy reports for it)
CONFIGS = {"tagger": ("tagger_elmo.cfg", "tag_acc"), "ner": ("ner_elmo.cfg", "ents_f")}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> Path:
    """``<component>/{train,dev}.spacy``: the demo slices, one sentence a doc, as the project's
    ``demo-convert`` makes them (spaCy's CoNLL-U converter; the project's NER script)."""
    directory = tmp_path_factory.mktemp("corpus")
    (directory / "tagger").mkdir()
    for split in ("train", "dev"):
        docs = conllu_to_docs((DEMO / "ud-english-ewt" / f"{split}.conllu").read_text(encoding="utf-8"), n_sents=1)
        DocBin(docs=list(docs)).to_disk(directory / "tagger" / f"{split}.spacy")
    project_script("conll_ner_to_spacy").main(directory / "ner", [DEMO / "wnut17" / "train.conll", DEMO / "wnut17" / "dev.conll"], n_sents=1)
    return directory


def _train(component: str, corpora: Path, output: Path, seed: int, device: torch.device) -> tuple:
    """(the trained component's weights as bytes, the last dev scores): a few steps on the first
    60 training and 20 dev docs."""
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    corpus = corpora / component
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "train", str(REPO / "project" / "configs" / CONFIGS[component][0]),
         "--output", str(output), "--gpu-id", gpu_id(device),
         "--paths.train", str(corpus / "train.spacy"), "--paths.dev", str(corpus / "dev.spacy"),
         "--corpora.train.limit", "60", "--corpora.dev.limit", "20",
         "--system.seed", str(seed), "--training.max_steps", "8", "--training.eval_frequency", "4",
         "--components.elmo.cache_size_mb", "16"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    last = output / "model-last"
    scores = json.loads((last / "meta.json").read_text())["performance"]
    return (last / component / "model").read_bytes(), scores


@pytest.mark.slow
@pytest.mark.parametrize("component", list(CONFIGS))
def test_the_projects_configs_train_on_the_device_and_reload(corpora, tmp_path, device, component):
    _, scores = _train(component, corpora, tmp_path / "out", seed=0, device=device)
    assert 0.0 <= scores[CONFIGS[component][1]] <= 1.0, scores
    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert nlp.pipe_names == ["elmo", component]
    doc = nlp("The bank in New York raised its rates .")
    predicted = {token.tag_ for token in doc} if component == "tagger" else {ent.label_ for ent in doc.ents}
    assert predicted <= set(nlp.get_pipe(component).labels), predicted


@pytest.mark.slow
def test_same_seed_same_weights_and_scores(corpora, tmp_path):
    cpu = torch.device("cpu")
    weights, scores = _train("tagger", corpora, tmp_path / "first", seed=0, device=cpu)
    again, scores_again = _train("tagger", corpora, tmp_path / "second", seed=0, device=cpu)
    assert again == weights  # bitwise
    assert scores_again == scores
    other_seed, _ = _train("tagger", corpora, tmp_path / "third", seed=1, device=cpu)
    assert other_seed != weights  # the seed does reach the tagger's initialisation and batches
