"""Shared fixtures: the bilm-tf test model and randomly initialised weight files of any shape;
the check that no test leaves a process running (``process_tree.py``)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, List, Sequence

import h5py
import numpy as np
import pytest
import torch

from process_tree import become_subreaper, no_process_left_behind, pytest_sessionfinish  # noqa: F401  (the checks)

# torch.compile's inductor keeps a pool of compile workers for the rest of the process, one per
# core on a large machine: the process check would count them as left behind by the
# first test that compiles. One compile thread compiles in the test's own process.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

# The test models are tiny: extra threads only add overhead, and on a busy shared machine a
# two-thread pool makes each small op wait for a core (100x slower runs were seen).
torch.set_num_threads(1)

FIXTURES = Path(__file__).parent / "fixtures"
ELMO_FIXTURE = FIXTURES / "allennlp_elmo"
REPO = Path(__file__).resolve().parents[1]
#: A biLM shape that pretrains in a second on the CPU (pretraining config overrides).
TINY_BILM = {
    "model.filters": [[1, 8], [2, 8], [3, 16]],
    "model.char_embedding_dim": 4,
    "model.lstm_dim": 32,
    "model.projection_dim": 16,
    "vocab.size": 500,
    "corpus.max_sequence_length": 30,
}


#: float32's machine epsilon: the spacing of float32 numbers in [1, 2).
F32_EPS = float(np.finfo(np.float32).eps)


def float32_tolerance(expected, ulps: float = 8) -> float:
    """The absolute tolerance between two float32 computations of the same values by different
    code paths (another kernel, batch shape, summation order or CPU: AVX2, AVX-512, AMX). Each
    path rounds every product and sum to float32, and the LSTMs carry those roundings through
    their recurrence and projections, so each result is a few units in the last place off the
    exact value, and the two differ by up to the sum of both: an amount that scales with the
    values' magnitude, not a fixed one (``atol=1e-6`` is about one unit for values near 8, tighter
    than the last op's own rounding there). ``ulps`` units of float32's epsilon times the largest
    magnitude of ``expected`` (at least 1: smaller values are sums of terms near 1); the largest
    difference these tests meet is well inside it, and a wrong result (another layer, a
    misplaced row or state) is off by orders of magnitude more."""
    expected = np.asarray(expected, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0
    return ulps * F32_EPS * scale


def assert_float32_close(actual, expected, ulps: float = 8, err_msg: str = "") -> None:
    """``actual`` equals ``expected`` up to ``float32_tolerance``: two code paths of the same
    float32 arithmetic. Not for a path against itself (that is bit for bit) or a lower precision."""
    actual, expected = (np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x) for x in (actual, expected))
    np.testing.assert_allclose(actual, expected, rtol=0, atol=float32_tolerance(expected, ulps), err_msg=err_msg)


def project_script(name: str) -> ModuleType:
    """A module of the project's ``scripts/`` folder, loaded from its file (the folder is no package)."""
    path = REPO / "project" / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"project_scripts_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def checkout_pythonpath() -> str:
    """PYTHONPATH for a subprocess that runs this checkout's code: the checkout first, then the
    caller's own PYTHONPATH (where some environments install packages: dropping it loses them)."""
    return os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)


#: ``python -c AS_FROM_A_TERMINAL ARGS...`` runs ``python ARGS...`` with Ctrl-C's signal at its
#: default, as a terminal starts a command. A process started where SIGINT is ignored (a
#: pytest-xdist worker, a shell's background job) inherits that, and Python then keeps ignoring
#: it, as it should; this sets it back, then becomes the command (same pid).
AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def cli_commands(command=None, path=()):
    """(path, click command) of ``python -m spacy_elmo``, every group and every command below it,
    through click's own lookup (the app loads a command's module when it is looked up)."""
    import typer

    from spacy_elmo.cli import app

    command = typer.main.get_command(app) if command is None else command
    yield path, command
    if hasattr(command, "list_commands"):  # a group
        ctx = typer.Context(command)
        for name in command.list_commands(ctx):
            yield from cli_commands(command.get_command(ctx, name), (*path, name))


def run_in_threads(work: Callable[[Any], Any], items: Sequence[Any], n_threads: int, deadline_s: float = 300) -> List[Any]:
    """``work`` on every item from ``n_threads`` threads at once (a web server's pool), results in
    item order. A thread's error is raised here; a thread still running at the deadline (a hang)
    fails the test instead of stalling the suite (the threads are daemons: they cannot keep the
    process alive either)."""
    results: List[Any] = [None] * len(items)
    errors: List[BaseException] = []
    pending = iter(range(len(items)))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                k = next(pending, None)
            if k is None:
                return
            try:
                results[k] = work(items[k])
            except BaseException as err:  # re-raised in the test's thread
                errors.append(err)
                return

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(n_threads)]
    for thread in threads:
        thread.start()
    end = time.monotonic() + deadline_s
    for thread in threads:
        thread.join(timeout=max(0.0, end - time.monotonic()))
    if any(thread.is_alive() for thread in threads):
        raise AssertionError(f"{n_threads} threads still running after {deadline_s} s: a hang")
    if errors:
        raise errors[0]
    return results


def make_options(
    activation: str = "relu",
    n_highway: int = 1,
    n_layers: int = 2,
    dim: int = 12,
    projection_dim: int = 6,
    filters=((1, 4), (2, 5), (3, 6)),
    char_dim: int = 3,
    clip: float = 3.0,
    use_skip_connections: bool = True,
) -> Dict[str, Any]:
    return {
        "char_cnn": {
            "activation": activation,
            "embedding": {"dim": char_dim},
            "filters": [list(f) for f in filters],
            "max_characters_per_token": 50,
            "n_characters": 262,
            "n_highway": n_highway,
        },
        "lstm": {
            "cell_clip": clip,
            "dim": dim,
            "n_layers": n_layers,
            "proj_clip": clip,
            "projection_dim": projection_dim,
            "use_skip_connections": use_skip_connections,
        },
    }


def write_random_bilm_tf(directory: Path, options: Dict[str, Any], seed: int = 0, scale: float = 0.5):
    """Write options.json + weights.hdf5 with random weights, straight in the bilm-tf layout
    (TensorFlow shapes), without going through spacy_elmo."""
    rng = np.random.default_rng(seed)
    cnn, lstm = options["char_cnn"], options["lstm"]
    e = cnn["embedding"]["dim"]
    d = sum(n for _, n in cnn["filters"])
    p, h = lstm["projection_dim"], lstm["dim"]

    def rand(*shape):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "options.json").write_text(json.dumps(options))
    with h5py.File(directory / "weights.hdf5", "w") as f:
        f["char_embed"] = rand(261, e)
        for i, (w, n) in enumerate(cnn["filters"]):
            f[f"CNN/W_cnn_{i}"] = rand(1, w, e, n)
            f[f"CNN/b_cnn_{i}"] = rand(n)
        for k in range(cnn["n_highway"]):
            for name in ("W_transform", "W_carry"):
                f[f"CNN_high_{k}/{name}"] = rand(d, d) / np.sqrt(d)
            for name in ("b_transform", "b_carry"):
                f[f"CNN_high_{k}/{name}"] = rand(d)
        f["CNN_proj/W_proj"] = rand(d, p) / np.sqrt(d)
        f["CNN_proj/b_proj"] = rand(p)
        for direction in range(2):
            for layer in range(lstm["n_layers"]):
                prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
                f[prefix + "W_0"] = rand(2 * p, 4 * h)
                f[prefix + "B"] = rand(4 * h)
                f[prefix + "W_P_0"] = rand(h, p) / np.sqrt(h) * 3
    return directory / "options.json", directory / "weights.hdf5"


def pytest_addoption(parser):
    parser.addoption(
        "--device",
        default="cpu",
        choices=("cpu", "cuda"),
        help="Where the tests that take the `device` fixture run (default: cpu)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "uses_device: takes the `device` fixture (set on collection)")
    become_subreaper()  # orphans of the tests come back here, where the checks below see them




def pytest_collection_modifyitems(config, items):
    """Mark the tests that take ``device``, so that a GPU run can pick them first (-m uses_device)."""
    for item in items:
        if "device" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.uses_device)


@pytest.fixture(scope="session")
def device(request) -> torch.device:
    """The device of ``--device``: tests that take it build their modules there. A test is
    correct on either (CUDA has other kernels: tolerances as the package promises for "fp32",
    which is exact where the process forbids TF32; this process does, once, as a user would:
    ``spacy_elmo.nn.precision``)."""
    name = request.config.getoption("--device")
    if name == "cuda" and not torch.cuda.is_available():
        pytest.skip(f"--device cuda: PyTorch {torch.__version__} sees no CUDA device")
    if name == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    return torch.device(name)


@pytest.fixture
def spacy_device(device):
    """spaCy's arrays on ``--device`` (CuPy after ``spacy.require_gpu()`` on CUDA) for the test,
    and on the CPU again after it, whatever the test switched to (``embed --gpu-id 0`` in this
    process does): the tests after it build their pipes on the CPU."""
    import spacy

    if device.type == "cuda":
        spacy.require_gpu()
    yield device
    spacy.require_cpu()


def gpu_id(device: torch.device) -> str:
    """The ``--gpu-id`` of spaCy's and the package's commands for ``device``."""
    return "0" if device.type == "cuda" else "-1"


@pytest.fixture
def matplotlib():
    """matplotlib, for a test that draws a chart; the test is skipped where it is not installed
    (it is the package's optional ``plot`` extra). The one way the tests handle that extra: the
    tests that draw take this fixture, so the others in their module still run without it."""
    return pytest.importorskip("matplotlib", reason="draws a chart: needs the 'plot' extra (pip install -e '.[plot]')")


@pytest.fixture(scope="session")
def fixture_files():
    return ELMO_FIXTURE / "options.json", ELMO_FIXTURE / "lm_weights.hdf5"


@pytest.fixture(scope="session")
def fixture_bilm(fixture_files):
    from spacy_elmo import load_bilm

    return load_bilm(*fixture_files)


@pytest.fixture(scope="session")
def fixture_sentences():
    return json.loads((ELMO_FIXTURE / "sentences.json").read_text())
