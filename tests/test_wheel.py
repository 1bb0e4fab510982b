"""The built wheel, installed into a fresh virtual environment, run from outside the checkout.

Every default the package offers (the bundled model, its shape and recipe, the bench's text)
must come from the installed package: a module that reads the source tree passes every other
test in a checkout and quietly measures something else once installed. So the wheel is built,
installed (not editable) into a new venv, and ``demo`` and ``bench`` run there with no model
arguments, only the smallest sizes they offer; the bench's JSON must name files inside the
venv's site-packages. The project's measurement kit (``benchmarks/``, run from a checkout) must
not be in the wheel.

Where torch and spaCy come from, with no network: the interpreter running the tests, which may
itself be a venv (the README's commands run in one). A venv made from a venv is based on the base
interpreter, so ``--system-site-packages`` alone would see the base's packages, not the ones the
tests run with; a ``.pth`` file in the new venv adds the running interpreter's site-packages after
its own. Which copy of spacy_elmo is imported: the checkout is installed editable there
(setuptools' ``__editable__`` finder, set up by a ``.pth`` file that a plain path entry does not
run), and the new venv's site-packages comes first on ``sys.path``, so the wheel's copy wins; the
commands run with ``PYTHONPATH`` removed and in a directory outside the checkout, so neither the
checkout nor ``''`` can shadow it. The test checks it: ``spacy_elmo.__file__`` in the venv.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What the wheel is built from: the checkout's files, the measurement kit beside the package included.
SOURCES = ("setup.py", "setup.cfg", "README.md", "spacy_elmo", "benchmarks")

pytestmark = pytest.mark.slow


def _run(argv: List[str], cwd: Path, env: Dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    run = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, f"{' '.join(argv)}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python of a venv holding the wheel, its spacy_elmo package directory, a working
    directory outside the checkout, the environment to run in, the wheel)."""
    base = tmp_path_factory.mktemp("wheel")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", PIP_NO_INPUT="1")
    # Build from a copy: pip builds a local directory in place, writing build/ and *.egg-info
    # into it, and the checkout is shared with other runs.
    source = base / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, source / name)
    wheelhouse = base / "wheelhouse"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(wheelhouse), str(source)],
        base, env,
    )
    (wheel,) = wheelhouse.glob("spacy_elmo-*.whl")
    venv = base / "venv"
    # No pip of its own: the tests' pip, seen through the .pth file, installs into the venv it
    # runs in. --ignore-installed: the editable install outside the venv is left alone.
    _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], base, env)
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], base, env)
    (Path(purelib.stdout.strip()) / "test_interpreter_packages.pth").write_text(
        "".join(f"{path}\n" for path in site.getsitepackages())
    )
    _run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed",
         "--no-compile", str(wheel)],
        base, env,
    )
    work = base / "work"
    work.mkdir()
    probe = _run(
        [str(python), "-c",
         "import json, spacy_elmo, sysconfig; "
         "print(json.dumps([spacy_elmo.__file__, sysconfig.get_paths()['purelib']]))"],
        work, env,
    )
    package_file, purelib = json.loads(probe.stdout)
    return {
        "python": str(python),
        "package": Path(package_file).parent,
        "purelib": Path(purelib),
        "work": work,
        "env": env,
        "wheel": wheel,
    }


def _bench(installed, *args: str, name: str) -> dict:
    output = installed["work"] / f"{name}.json"
    run = _run(
        [installed["python"], "-m", "spacy_elmo", "bench", *args, "--output", str(output)],
        installed["work"], installed["env"],
    )
    result = json.loads(output.read_text())
    result["_stdout"] = run.stdout
    return result


def test_the_venv_imports_the_wheel_not_the_checkout(installed):
    package = installed["package"]
    assert package == installed["purelib"] / "spacy_elmo"
    assert ROOT not in package.resolve().parents
    with zipfile.ZipFile(installed["wheel"]) as wheel:
        names = set(wheel.namelist())
    for data in (
        "spacy_elmo/models/en_wikitext_small/config.cfg",
        "spacy_elmo/models/en_wikitext_small/options.json",
        "spacy_elmo/models/en_wikitext_small/model.safetensors",
        "spacy_elmo/data/wikitext2_valid_head.txt",
        "spacy_elmo/data/wikitext2_valid_head.NOTICE.txt",
        "spacy_elmo/data/senses.jsonl",
        "spacy_elmo/configs/pretrain.cfg",
        "spacy_elmo/configs/recipes/bilm-tf.cfg",
    ):
        assert data in names, data
        assert (package.parent / data).is_file(), data


def test_demo_runs_the_bundled_model(installed):
    run = _run([installed["python"], "-m", "spacy_elmo", "demo"], installed["work"], installed["env"])
    # The demo reads the sense sentences the wheel ships (data/senses.jsonl).
    assert "ELMo: 3 layers of width 256" in run.stdout and "Right sense wins for" in run.stdout


def test_bench_runs_the_bundled_model_on_the_packaged_text(installed):
    """The user's bench (python -m spacy_elmo bench) measures the wheel's bundled model on the
    wheel's text, each cell in a process of its own (spawned from the venv's interpreter)."""
    result = _bench(
        installed, "--precision", "fp32", "--threads", "1", "--batch-size", "4", "--warmup", "0",
        "--batches", "1", "--rounds", "1", name="bench",
    )
    package = installed["package"]
    assert result["settings"]["text"] == str(package / "data" / "wikitext2_valid_head.txt")
    assert str(package / "models" / "en_wikitext_small" / "model.safetensors") in result["settings"]["weights"]
    (cell,) = result["cells"]
    assert cell["model_block"] == {"precision": "fp32", "threads": 1} and cell["tokens"] > 0


def test_the_measurement_kit_is_not_installed(installed):
    """benchmarks/ sits beside the package in the checkout the wheel was built from (copied into
    its source): it is the project's, not the users', and stays out of the wheel."""
    with zipfile.ZipFile(installed["wheel"]) as wheel:
        assert not [name for name in wheel.namelist() if name.startswith("benchmarks/")]
    probe = subprocess.run(
        [installed["python"], "-c", "import benchmarks"], cwd=installed["work"], env=installed["env"],
        capture_output=True, text=True, timeout=120,
    )
    assert probe.returncode != 0 and "No module named 'benchmarks'" in probe.stderr
