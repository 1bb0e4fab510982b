"""``python -m spacy package`` on a pipeline with the elmo pipe: spacy-elmo becomes a requirement."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import spacy

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_spacy_package_requires_spacy_elmo(tmp_path, fixture_files):
    nlp = spacy.blank("en")
    options, weights = map(str, fixture_files)
    nlp.add_pipe("elmo", config={"options_file": options, "weight_file": weights})
    nlp.to_disk(tmp_path / "pipeline")
    (tmp_path / "packages").mkdir()
    # spaCy finds the plugin through the installed distribution's entry points; PYTHONPATH makes
    # the subprocess import this checkout's code, as the tests do.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "package", str(tmp_path / "pipeline"), str(tmp_path / "packages"),
         "--name", "elmo_test", "--version", "0.0.1", "--build", "sdist", "--force"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    package = tmp_path / "packages" / "en_elmo_test-0.0.1"
    requirements = json.loads((package / "meta.json").read_text())["requirements"]
    assert any(r.startswith("spacy-elmo>=") for r in requirements), requirements
    assert list((package / "dist").glob("en_elmo_test-0.0.1.tar.gz"))
    assert (package / "en_elmo_test" / "en_elmo_test-0.0.1" / "elmo" / "model").stat().st_size > 400_000
