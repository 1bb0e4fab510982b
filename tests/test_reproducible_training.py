"""Two ``spacy train`` runs of an ELMo-listener tagger with the same seed give identical weights
and scores (CPU). Run as a user runs them: subprocesses, the project's tagger_elmo.cfg, the
bundled biLM, a slice of the UD English-EWT demo data shipped with the project."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from spacy.tokens import DocBin
from spacy.training.converters import conllu_to_docs

from conftest import checkout_pythonpath

REPO = Path(__file__).resolve().parents[1]
EWT = REPO / "project" / "demo_data" / "ud-english-ewt"
CONFIG = REPO / "project" / "configs" / "tagger_elmo.cfg"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("corpus")
    for split, n_docs in (("train", 60), ("dev", 20)):
        docs = list(conllu_to_docs((EWT / f"{split}.conllu").read_text(encoding="utf-8"), n_sents=1))
        DocBin(docs=docs[:n_docs]).to_disk(directory / f"{split}.spacy")
    return directory


def _train(corpus: Path, output: Path, seed: int) -> tuple:
    """(the trained tagger's weights as bytes, the last dev scores)."""
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "train", str(CONFIG), "--output", str(output),
         "--paths.train", str(corpus / "train.spacy"), "--paths.dev", str(corpus / "dev.spacy"),
         "--system.seed", str(seed), "--training.max_steps", "8", "--training.eval_frequency", "4",
         "--components.elmo.cache_size_mb", "16"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    last = output / "model-last"
    scores = json.loads((last / "meta.json").read_text())["performance"]
    return (last / "tagger" / "model").read_bytes(), scores


@pytest.mark.slow
def test_same_seed_same_weights_and_scores(corpus, tmp_path):
    weights, scores = _train(corpus, tmp_path / "first", seed=0)
    again, scores_again = _train(corpus, tmp_path / "second", seed=0)
    assert again == weights  # bitwise
    assert scores_again == scores
    other_seed, _ = _train(corpus, tmp_path / "third", seed=1)
    assert other_seed != weights  # the seed does reach the tagger's initialisation and batches
