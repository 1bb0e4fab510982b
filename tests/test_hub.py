"""Released models by name: download into the cache over real HTTP on 127.0.0.1, find them again.

The server is Python's ``http.server`` started in the test, serving the bilm-tf fixture files with
switchable faults (a dropped connection, a response held until the test lets it go). Nothing here
touches the internet.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Optional

import h5py
import numpy as np
import pytest
import srsly
import torch
from typer.testing import CliRunner

from conftest import AS_FROM_A_TERMINAL, ELMO_FIXTURE, checkout_pythonpath
from spacy_elmo import batch_to_ids, load_bilm
from spacy_elmo.files import write_json_atomically
from spacy_elmo.hub import (
    CannotConnectError,
    DownloadError,
    ModelNotCachedError,
    cache_root,
    download_model,
    get_release,
    list_cached,
    model_dir,
    releases,
)
from spacy_elmo.hub.cache import MANIFEST_NAME, model_path, read_manifest
from spacy_elmo.nn.bilm import BiLM
from spacy_elmo.options import BiLMOptions

OPTIONS_BYTES = (ELMO_FIXTURE / "options.json").read_bytes()
WEIGHTS_BYTES = (ELMO_FIXTURE / "lm_weights.hdf5").read_bytes()
TIMEOUT = 10.0
WORDS = ["The", "bank", "of", "the", "river", "."]


class FixtureServer:
    """Serves ``files`` (path -> bytes); records every request's path and ``Range`` header (a
    download that starts again must not ask for the rest of a file)."""

    def __init__(self) -> None:
        self.files: Dict[str, bytes] = {
            "/tiny/options.json": OPTIONS_BYTES,
            "/tiny/weights.hdf5": WEIGHTS_BYTES,
        }
        self.drop_after: Dict[str, int] = {}  # path -> bytes sent before the connection drops, once
        self.stall_after: Dict[str, int] = {}  # path -> bytes sent before the server waits for ``gate``, once
        self.delay = 0.0  # seconds before each response's body
        #: When set: the body of every response to this path waits for ``gate``, and ``requested``
        #: says such a request arrived (a test holds a download mid-way at a known point instead
        #: of racing a clock).
        self.held_path: Optional[str] = None
        self.gate = threading.Event()
        self.requested = threading.Event()
        self.requests: List[tuple] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append((self.path, self.headers.get("Range")))
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404, "Not Found")
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.path == server.held_path:
                    server.requested.set()
                    server.gate.wait(timeout=120)
                time.sleep(server.delay)
                cut = server.drop_after.pop(self.path, None)
                stall = server.stall_after.pop(self.path, None)
                if stall is not None:
                    self.wfile.write(body[:stall])
                    self.wfile.flush()
                    server.gate.wait(timeout=120)
                    return
                self.wfile.write(body if cut is None else body[:cut])
                self.close_connection = True

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    running = FixtureServer()
    yield running
    running.close()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACY_ELMO_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _download(server: FixtureServer, name: str = "tiny", **kwargs) -> Path:
    return download_model(
        name,
        options_url=server.url("/tiny/options.json"),
        weights_url=server.url(kwargs.pop("weights_path", "/tiny/weights.hdf5")),
        timeout=TIMEOUT,
        progress=False,
        **kwargs,
    )


def _layers(bilm, words):
    with torch.no_grad():
        return bilm(torch.from_numpy(batch_to_ids([words])))[0].numpy()


def test_download_then_load_by_name(server, home):
    directory = _download(server)
    assert directory == home / "tiny" == model_dir("tiny")
    assert (directory / "weights.hdf5").read_bytes() == WEIGHTS_BYTES
    manifest = srsly.read_json(directory / "manifest.json")
    assert manifest["complete"] is True
    assert manifest["files"]["weights.hdf5"] == {
        "url": server.url("/tiny/weights.hdf5"),
        "size": len(WEIGHTS_BYTES),
        "sha256": hashlib.sha256(WEIGHTS_BYTES).hexdigest(),
    }
    assert manifest["files"]["options.json"]["sha256"] == hashlib.sha256(OPTIONS_BYTES).hexdigest()
    cached = load_bilm(model_dir("tiny"))
    direct = load_bilm(ELMO_FIXTURE / "options.json", ELMO_FIXTURE / "lm_weights.hdf5")
    np.testing.assert_array_equal(_layers(cached, WORDS), _layers(direct, WORDS))
    (entry,) = list_cached()
    assert (entry.name, entry.complete, entry.shape) == ("tiny", True, "LSTM 64/16, 2 highway")
    # A second download of a complete model asks the server nothing.
    before = len(server.requests)
    assert _download(server) == directory
    assert len(server.requests) == before


def test_manifest_writers_racing_never_move_each_others_file(tmp_path):
    """Two downloads of one model finish together: each writes the manifest through a temporary
    file of its own (a shared name let one writer move the other's file away mid-write)."""
    errors = []

    def write(n: int) -> None:
        try:
            for i in range(300):
                write_json_atomically(tmp_path / MANIFEST_NAME, {"writer": n, "i": i})
        except OSError as err:  # pragma: no cover - reported by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert read_manifest(tmp_path)["i"] == 299
    assert [path.name for path in tmp_path.iterdir()] == ["manifest.json"]


def test_a_download_leaves_poochs_logger_as_it_found_it(server, home):
    """The download quiets pooch's advice with a filter of its own, removed after; the level the
    user set on pooch's logger is never touched (overlapping downloads restored it out of order)."""
    import pooch

    logger = pooch.get_logger()
    level, filters = logger.level, list(logger.filters)
    _download(server)
    assert (logger.level, logger.filters) == (level, filters)


def test_concurrent_downloads_of_one_model_both_end_with_it(server, home):
    """Two downloads of the same model at once (two training jobs started together): each fetches
    into its own staging folder and moves whole files in, so both return the complete model. The
    server holds both responses until both downloads have asked, so they overlap whatever the
    machine's load."""
    server.held_path = "/tiny/options.json"
    results, errors = [], []

    def run() -> None:
        try:
            results.append(_download(server))
        except Exception as err:  # pragma: no cover - reported by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while len(server.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(server.requests) == 2, "the two downloads never overlapped"
    server.gate.set()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and results == [home / "tiny", home / "tiny"]
    assert (model_dir("tiny") / "weights.hdf5").read_bytes() == WEIGHTS_BYTES
    assert [path.name for path in home.iterdir()] == ["tiny"]  # no staging folder left


def test_404_is_a_clear_error_and_leaves_nothing(server, home):
    with pytest.raises(DownloadError, match=r"/tiny/missing\.hdf5: HTTP 404 Not Found"):
        _download(server, weights_path="/tiny/missing.hdf5")
    assert list(home.iterdir()) == []  # neither the model's folder nor the staging folder
    with pytest.raises(ModelNotCachedError):
        model_dir("tiny")


def test_dropped_connection_leaves_nothing_and_starts_again(server, home):
    """pooch does not resume: a dropped download leaves nothing, and the next run fetches the
    whole file from byte 0 (no ``Range`` request)."""
    server.drop_after["/tiny/weights.hdf5"] = len(WEIGHTS_BYTES) // 3
    with pytest.raises(DownloadError, match=r"/tiny/weights\.hdf5: the download failed .*nothing was kept"):
        _download(server)
    assert list(home.iterdir()) == []
    with pytest.raises(ModelNotCachedError, match="not downloaded"):
        model_dir("tiny")
    _download(server)
    weight_requests = [r for r in server.requests if r[0] == "/tiny/weights.hdf5"]
    assert weight_requests == [("/tiny/weights.hdf5", None)] * 2
    assert (model_dir("tiny") / "weights.hdf5").read_bytes() == WEIGHTS_BYTES


def test_a_server_that_stalls_mid_file_is_no_lost_connection(server, home):
    """A read timeout while the body streams (requests calls it a ConnectionError) says the
    download stalled, not that there is no network, and leaves nothing."""
    server.stall_after["/tiny/weights.hdf5"] = len(WEIGHTS_BYTES) // 3
    try:
        with pytest.raises(DownloadError, match=r"weights\.hdf5: the download stalled for 1 s mid-file") as caught:
            download_model(
                "tiny", options_url=server.url("/tiny/options.json"),
                weights_url=server.url("/tiny/weights.hdf5"), timeout=1.0, progress=False,
            )  # fmt: skip
    finally:
        server.gate.set()
    assert not isinstance(caught.value, CannotConnectError)
    assert list(home.iterdir()) == []


def test_a_failed_forced_download_keeps_the_cached_model(server, home):
    directory = _download(server)
    with pytest.raises(DownloadError, match="HTTP 404"):
        _download(server, weights_path="/tiny/missing.hdf5", force=True)
    assert model_dir("tiny") == directory and [m.complete for m in list_cached()] == [True]
    assert (directory / "weights.hdf5").read_bytes() == WEIGHTS_BYTES
    # A forced download that drops leaves the usable copy as it was, and nothing beside it.
    server.drop_after["/tiny/weights.hdf5"] = len(WEIGHTS_BYTES) // 3
    with pytest.raises(DownloadError):
        _download(server, force=True)
    assert model_dir("tiny") == directory
    assert (directory / "weights.hdf5").read_bytes() == WEIGHTS_BYTES
    assert [path.name for path in home.iterdir()] == ["tiny"]
    _download(server, force=True)
    assert sorted(p.name for p in directory.iterdir()) == ["manifest.json", "options.json", "weights.hdf5"]


def test_truncated_weight_file_is_refused(server, home):
    server.files["/tiny/short.hdf5"] = WEIGHTS_BYTES[: len(WEIGHTS_BYTES) // 2]
    refused = r"short\.hdf5: the downloaded weight file was refused: .*weights\.hdf5"
    with pytest.raises(DownloadError, match=refused):
        _download(server, weights_path="/tiny/short.hdf5")
    assert not (home / "tiny").exists()


def test_wrong_checksum_is_refused(server, home):
    actual = hashlib.sha256(WEIGHTS_BYTES).hexdigest()
    with pytest.raises(DownloadError, match=f"weights.hdf5: .*expected sha256:{'0' * 64} but got {actual}"):
        _download(server, weights_sha256="0" * 64)
    assert list(home.iterdir()) == []
    assert _download(server, weights_sha256=actual.upper()) == model_dir("tiny")


def test_ctrl_c_mid_download_leaves_nothing_that_looks_complete(server, home, tmp_path):
    """Ctrl-C while the weight file streams in (the server holds it mid-way): the staging folder
    and pooch's temporary file go, a first download leaves no folder, and a forced download over a
    cached copy leaves that copy usable."""
    env = {**os.environ, "SPACY_ELMO_HOME": str(home), "OMP_NUM_THREADS": "1", "PYTHONPATH": checkout_pythonpath()}
    args = ["--options-url", server.url("/tiny/options.json"), "--weight-url", server.url("/tiny/weights.hdf5")]

    def interrupt(*extra: str) -> int:
        server.held_path, server.gate, server.requested = "/tiny/weights.hdf5", threading.Event(), threading.Event()
        job = subprocess.Popen(
            [sys.executable, "-c", AS_FROM_A_TERMINAL, "-m", "spacy_elmo", "download", *args, "--name", "tiny", *extra],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            assert server.requested.wait(timeout=120), "the download never asked for the weight file"
            job.send_signal(signal.SIGINT)
            return job.wait(timeout=120)
        finally:
            server.gate.set()
            if job.poll() is None:
                job.kill()
                job.wait()

    assert interrupt() in (130, -signal.SIGINT)  # stopped by the signal, not some other crash
    assert list(home.iterdir()) == []
    server.held_path = None
    directory = _download(server)
    assert interrupt("--force") in (130, -signal.SIGINT)
    assert [path.name for path in home.iterdir()] == ["tiny"]
    assert model_dir("tiny") == directory
    assert (directory / "weights.hdf5").read_bytes() == WEIGHTS_BYTES


def test_a_mirror_named_after_a_release_must_have_its_shape(server, home):
    expected = r"'small' model \(elmo_2x1024_128_2048cnn_1xhighway\) has \(1024, 128, 1\)"
    with pytest.raises(DownloadError, match=expected):
        _download(server, name="small")
    assert list(home.iterdir()) == []
    assert "/tiny/weights.hdf5" not in [path for path, _ in server.requests]  # refused before it


def test_model_dir_of_a_missing_model_gives_the_download_command(home):
    with pytest.raises(ModelNotCachedError) as released:
        model_dir("original-5.5b")
    assert "python -m spacy_elmo download original-5.5b" in str(released.value)
    assert model_path("elmo_2x4096_512_2048cnn_2xhighway_5.5B") == home / "original-5.5b"
    assert str(home) in str(released.value)
    with pytest.raises(ModelNotCachedError) as custom:
        model_dir("my-elmo")
    command = "python -m spacy_elmo download --options-url OPTIONS_URL --weight-url WEIGHTS_URL --name my-elmo"
    assert command in str(custom.value)


def test_cache_root_without_spacy_elmo_home(tmp_path, monkeypatch):
    monkeypatch.delenv("SPACY_ELMO_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert cache_root() == tmp_path / "xdg" / "spacy_elmo"
    monkeypatch.setenv("SPACY_ELMO_HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home"


@pytest.mark.parametrize("name", ["small", "medium", "original", "original-5.5b"])
def test_catalog_shapes_give_allennlp_parameter_counts(name):
    """allennlp.org/elmo lists 13.6M, 28.0M, 93.6M, 93.6M parameters for these shapes."""
    release = releases()[name]
    options = BiLMOptions.from_dict(
        {
            "char_cnn": {
                "activation": "relu",
                "embedding": {"dim": 16},
                "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
                "max_characters_per_token": 50,
                "n_characters": 262,
                "n_highway": release.n_highway,
            },
            "lstm": {"cell_clip": 3, "dim": release.lstm_dim, "n_layers": 2, "proj_clip": 3,
                     "projection_dim": release.projection_dim, "use_skip_connections": True},
        }
    )
    with torch.device("meta"):
        bilm = BiLM(options)
    # bias_hh is torch's second bias; the released files hold one bias per LSTM cell.
    count = sum(v.numel() for k, v in bilm.state_dict().items() if not k.endswith("bias_hh_l0"))
    assert round(count / 1e6, 1) == release.parameters_millions
    assert abs(release.weights_mb - count * 4 / 1e6) < 1
    for url in (release.options_url, release.weights_url):
        assert url.startswith("https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/")
        assert f"/{release.allennlp_name}_" in url


def test_download_and_list_from_the_command_line(server, tmp_path):
    env = {**os.environ, "SPACY_ELMO_HOME": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = checkout_pythonpath()

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "spacy_elmo", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    result = run("list")
    assert result.returncode == 0 and "no models yet" in result.stdout, result.stderr
    args = ["--options-url", server.url("/tiny/options.json"), "--weight-url", server.url("/tiny/weights.hdf5")]
    result = run("download", *args, "--name", "tiny")
    assert result.returncode == 0, result.stderr
    result = run("download", *args[:2], "--weight-url", server.url("/nope.hdf5"), "--name", "other")
    assert result.returncode == 1 and "HTTP 404" in result.stderr
    server.stall_after["/tiny/weights.hdf5"] = 1000
    try:
        result = run("download", *args, "--name", "slow", "--timeout", "1")
    finally:
        server.gate.set()
    assert result.returncode == 1 and "stalled for 1 s mid-file" in result.stderr, result.stderr
    assert "--timeout waits longer" in result.stderr
    result = run("download", "nope")
    assert result.returncode == 1 and "unknown ELMo model 'nope'" in result.stderr, result.stderr
    result = run("list")
    assert result.returncode == 0, result.stderr
    lines = [line.split("\t") for line in result.stdout.splitlines()[1:]]
    path = str(tmp_path / "cache" / "tiny")
    assert lines == [["tiny", "0.5 MB", "LSTM 64/16, 2 highway", path, "complete"]]


def test_pipe_model_name_loads_from_the_cache_and_never_needs_it_after_saving(server, home, tmp_path):
    import shutil

    import spacy

    _download(server)
    by_name = spacy.blank("en")
    by_name.add_pipe("elmo", config={"model": {"weights": "tiny"}})
    by_name.initialize()
    by_files = spacy.blank("en")
    files = {
        "options_file": str(ELMO_FIXTURE / "options.json"),
        "weight_file": str(ELMO_FIXTURE / "lm_weights.hdf5"),
    }
    by_files.add_pipe("elmo", config={"model": files})
    by_files.initialize()
    text = "The bank of the river ."
    expected = by_files(text)._.elmo_layers
    np.testing.assert_array_equal(by_name(text)._.elmo_layers, expected)

    by_name.to_disk(tmp_path / "pipeline")
    shutil.rmtree(home)
    restored = spacy.load(tmp_path / "pipeline")  # carries its own weights
    np.testing.assert_array_equal(restored(text)._.elmo_layers, expected)


def test_pipe_model_name_missing_says_how_to_download(home):
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"weights": "small"}})
    with pytest.raises(ModelNotCachedError, match="(?s)elmo pipe 'elmo': .*python -m spacy_elmo download small"):
        nlp.initialize()


def test_embed_with_model_name(server, home, tmp_path):
    from typer.testing import CliRunner

    from spacy_elmo.cli import app

    (tmp_path / "input.txt").write_text("The bank of the river .\n")
    args = ["embed", str(tmp_path / "input.txt"), str(tmp_path / "a.hdf5"), "--weights", "tiny"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "python -m spacy_elmo download --options-url" in result.output
    _download(server)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    direct = load_bilm(ELMO_FIXTURE / "options.json", ELMO_FIXTURE / "lm_weights.hdf5")
    with h5py.File(tmp_path / "a.hdf5", "r") as f:
        np.testing.assert_allclose(f["0"][()], _layers(direct, WORDS)[:, 0], atol=1e-6)


def test_convert_and_init_config_take_a_downloaded_model_by_name(server, home, tmp_path):
    from spacy_elmo.cli import app
    from spacy_elmo.sources import resolve_weight_source

    cached = _download(server)
    source = resolve_weight_source("tiny")
    assert source.directory == cached and source.format == "bilm-tf"
    runner = CliRunner()
    result = runner.invoke(app, ["convert", "tiny", str(tmp_path / "native")])
    assert result.exit_code == 0, result.output
    assert _layers(load_bilm(tmp_path / "native"), ["A", "test", "."]).tolist() == _layers(
        load_bilm(cached), ["A", "test", "."]
    ).tolist()
    result = runner.invoke(app, ["init-config", str(tmp_path / "cont.cfg"), "--model", "tiny"])
    assert result.exit_code == 0, result.output
    assert 'init_bilm = "tiny"' in (tmp_path / "cont.cfg").read_text()
    result = runner.invoke(app, ["convert", "small", str(tmp_path / "nothing")])
    assert result.exit_code == 1 and "python -m spacy_elmo download small" in result.output


def _closed_port() -> int:
    """A port on 127.0.0.1 that refuses connections: bound, then closed again."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_download_without_a_connection_says_what_works_offline(tmp_path):
    """A refused connection (a closed port on 127.0.0.1) names the URL, then the ways that need no
    network: the released files given as local files (into the cache folder it names), or used
    where they are."""
    port = _closed_port()
    env = {**os.environ, "SPACY_ELMO_HOME": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = checkout_pythonpath()
    urls = [f"http://127.0.0.1:{port}/options.json", f"http://127.0.0.1:{port}/weights.hdf5"]
    result = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "download", "small", "--options-url", urls[0], "--weight-url", urls[1]],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == f"Downloading {urls[0]}", result.stderr
    assert lines[1].startswith(f"error: {urls[0]}: cannot connect"), result.stderr
    release = get_release("small")
    for expected in (
        "Without the network:",
        release.options_url,
        release.weights_url,
        f"cache them as 'small' ({tmp_path / 'cache' / 'small'})",
        "python -m spacy_elmo download small --options-url OPTIONS_FILE --weight-url WEIGHT_FILE",
        "--options-file OPTIONS_FILE --weight-file WEIGHT_FILE",
        "[components.elmo.model]",
    ):
        assert expected in result.stderr, expected
    assert not (tmp_path / "cache" / "small").exists()


def test_download_takes_local_files_for_a_machine_without_the_network(home, fixture_files, tmp_path):
    options, weights = fixture_files
    directory = download_model("tiny", options_url=str(options), weights_url=str(weights), progress=False)
    assert directory == model_dir("tiny")
    assert srsly.read_json(directory / "manifest.json")["urls"]["options.json"] == options.resolve().as_uri()
    with pytest.raises(CannotConnectError, match="Without the network"):
        port = _closed_port()
        download_model("other", options_url=f"http://127.0.0.1:{port}/o.json", weights_url=str(weights), progress=False)
    missing = tmp_path / "elsewhere" / "options.json"
    with pytest.raises(DownloadError, match=f"{missing.as_uri()}: .*No such file"):
        download_model("other", options_url=str(missing), weights_url=str(weights), progress=False)
    assert [path.name for path in home.iterdir()] == ["tiny"]
