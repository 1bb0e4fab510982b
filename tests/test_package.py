"""``python -m spacy package`` on a pipeline with the elmo pipe: spacy-elmo becomes a requirement."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from packaging.requirements import Requirement
from packaging.utils import parse_wheel_filename
from spacy.cli.package import get_third_party_dependencies

from conftest import checkout_pythonpath

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_spacy_package_requires_spacy_elmo(tmp_path, fixture_files):
    nlp = spacy.blank("en")
    options, weights = map(str, fixture_files)
    nlp.add_pipe("elmo", config={"model": {"options_file": options, "weight_file": weights}})
    nlp.initialize()
    nlp.to_disk(tmp_path / "pipeline")
    (tmp_path / "packages").mkdir()
    # spaCy finds the plugin through the installed distribution's entry points; PYTHONPATH makes
    # the subprocess import this checkout's code, as the tests do.
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath()}
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


@pytest.mark.slow
def test_a_wheel_of_spacy_elmo_meets_the_packages_requirement(tmp_path):
    """The README's route for installing a packaged pipeline while spacy-elmo is not on the
    package index: ``pip wheel --no-deps -w wheelhouse /path/to/spacy_elmo`` gives a wheel that pip
    can pick for the requirement spaCy writes (``spacy-elmo>=X,<Y``)."""
    source = tmp_path / "spacy_elmo_source"  # a copy: the build leaves build/ and *.egg-info behind
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", "tests", "project", "docs", "build", "*.egg-info"))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(tmp_path / "wheelhouse"), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (wheel,) = (tmp_path / "wheelhouse").glob("*.whl")
    name, version, _, _ = parse_wheel_filename(wheel.name)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    (requirement,) = [r for r in get_third_party_dependencies(nlp.config) if r.startswith("spacy-elmo")]
    assert name == "spacy-elmo" and Requirement(requirement).specifier.contains(version), (requirement, wheel.name)
