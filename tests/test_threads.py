"""Threads: the biLM's own split of a batch (``threads``), which never writes PyTorch's thread
count or any other process-wide setting during a call; forked and spawned workers."""

import threading
import time

import pytest
import spacy
import torch

from conftest import checkout_pythonpath, run_in_threads
from spacy_elmo.nn.threads import torch_threads


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _pipeline(fixture_files, **model):
    options, weights = map(str, fixture_files)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"options_file": options, "weight_file": weights, **model}})
    return nlp


def _threads_seen_by_the_bilm(nlp) -> list:
    """The thread count in force each time the biLM's forward runs (a forward hook records it)."""
    seen = []
    nlp.initialize()
    nlp.get_pipe("elmo").bilm.register_forward_hook(lambda *_: seen.append(torch.get_num_threads()))
    return seen


def test_torch_threads_restores_the_setting(two_threads):
    """For a command's whole run (pretraining): set, then restored, also after an error."""
    with torch_threads(1) as n:
        assert n == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError):
        with torch_threads(1):
            raise RuntimeError("an error inside the block")
    assert torch.get_num_threads() == 2
    with torch_threads(None) as n:
        assert n == 2


@pytest.mark.parametrize("threads", [1, 2])
def test_the_pipe_never_writes_the_callers_thread_count(fixture_files, two_threads, threads):
    """One piece: the biLM runs on the caller's count. Split in two: each piece (the caller's
    thread one of them) runs its ops on one thread, set for those threads alone, and the caller's
    count is its own again after the call."""
    nlp = _pipeline(fixture_files, threads=threads)
    seen = _threads_seen_by_the_bilm(nlp)
    list(nlp.pipe(["One doc .", "Another doc ."]))
    assert seen and set(seen) == ({2} if threads == 1 else {1})
    assert nlp.get_pipe("elmo").runner.threads == threads and torch.get_num_threads() == 2


def test_one_op_thread_is_the_calling_threads_alone(two_threads):
    """Inside the block the calling thread runs PyTorch's ops on one thread (OpenMP's count and
    MKL's, read back from the libraries); a thread started meanwhile gets the process's count, and
    the caller's is back after the block."""
    from spacy_elmo.nn.threads import _thread_counts, one_op_thread

    if _thread_counts() is None:
        pytest.skip("PyTorch's OpenMP runtime is out of reach here (the pipe falls back, and warns)")
    mkl = _mkl_threads()
    other = []
    with one_op_thread():
        assert torch.get_num_threads() == 1 and mkl() in (None, 1)
        thread = threading.Thread(target=lambda: other.append(torch.get_num_threads()))
        thread.start()
        thread.join(timeout=60)
    assert other == [2] and torch.get_num_threads() == 2 and mkl() in (None, 2)


def _mkl_threads():
    """MKL's count for the calling thread (None without MKL)."""
    import ctypes
    from pathlib import Path

    try:
        get = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so")).mkl_get_max_threads
    except (OSError, AttributeError):
        return lambda: None
    return lambda: get()


def test_auto_splits_over_the_usable_cores(fixture_files, monkeypatch):
    """threads = "auto" (the default): the usable cores, at most 2, whatever PyTorch's count,
    each piece on one op thread; decided when the pipe is made."""
    from spacy_elmo.nn import threads

    if threads._thread_counts() is None:
        pytest.skip("PyTorch's OpenMP runtime is out of reach here (see the fallback test)")
    monkeypatch.setattr(threads, "usable_cores", lambda: 1)
    assert threads.resolve_threads("auto") == 1
    monkeypatch.setattr(threads, "usable_cores", lambda: 16)
    assert threads.resolve_threads("auto") == 2 and threads.resolve_threads(3) == 3
    with torch_threads(2):
        assert threads.resolve_threads("auto") == 2
        nlp = _pipeline(fixture_files)
        doc = nlp("Auto threads beside PyTorch's own .")
    assert nlp.get_pipe("elmo").runner.threads == 2 and doc._.elmo.shape[0] == len(doc)
    assert threads.usable_cores() >= 1


@pytest.mark.parametrize("bad", [0, -1])  # 1.5: spaCy's config validation names the key
def test_bad_threads_name_the_key(fixture_files, bad):
    options, weights = fixture_files
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match='ElmoModel.v2: threads must be an integer >= 1 or "auto", got '):
        nlp.add_pipe("elmo", config={"model": {"options_file": str(options), "weight_file": str(weights), "threads": bad}})


def test_forked_workers_run_on_one_thread_whatever_the_setting(tmp_path, fixture_files):
    """threads = 2 with nlp.pipe(n_process=2) after the parent ran torch: the workers use one
    thread (a second one would wait forever on the pool fork broke), in a subprocess with a
    time limit so that a hang fails the test instead of stalling the suite."""
    import os
    import subprocess
    import sys

    options, weights = map(str, fixture_files)
    script = f"""
import warnings, numpy as np, spacy
nlp = spacy.blank("en")
nlp.add_pipe("elmo", config={{"model": {{"options_file": {options!r}, "weight_file": {weights!r}, "threads": 2}}}})
texts = [f"Sentence {{i}} in a worker ." for i in range(8)]
expected = [d._.elmo for d in nlp.pipe(texts)]
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    docs = list(nlp.pipe(texts, n_process=2, batch_size=2))
assert all(np.allclose(d.vector, d._.elmo.mean(0), atol=1e-6) for d in docs)
assert all(np.allclose(d._.elmo, e, atol=1e-5) for d, e in zip(docs, expected))
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "2"}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_replaced_listener_runs_its_biLM_copy_with_the_pipes_threads(fixture_files, two_threads):
    """nlp.replace_listeners gives a component its own copy of the biLM (ElmoEmbedder): it keeps
    the pipe's thread setting, and runs on the caller's thread count."""
    from spacy_elmo.layers.bilm_model import get_runner

    nlp = _pipeline(fixture_files, threads=1)
    nlp.add_pipe("tagger", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": {
        "@architectures": "spacy_elmo.ElmoListener.v1", "width": 8, "upstream": "elmo"}}})
    nlp.get_pipe("tagger").add_label("X")
    nlp.initialize()
    nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])
    embedder = nlp.get_pipe("tagger").model.get_ref("tok2vec")
    seen = []
    runner = get_runner(embedder.layers[0])  # ElmoEmbedder = [its ElmoModel, its mix head]
    runner.bilm.register_forward_hook(lambda *_: seen.append(torch.get_num_threads()))
    nlp.remove_pipe("elmo")
    nlp("The tagger runs its own biLM .")
    assert seen and set(seen) == {2} and runner.threads == 1
    assert torch.get_num_threads() == 2


def test_a_pipe_in_one_thread_leaves_another_threads_settings_alone(fixture_files):
    """While pipes run in other threads (float32 split over 2 threads, int8, one loading its
    weights on first use), a thread that set its TF32 flags and its thread count reads them as
    it set them throughout, and a thread started afterwards gets the count the process was left
    with: no process-wide setting is written during a pipe call."""
    texts = [f"Sentence {i} of the bank by the river ." for i in range(6)]
    pipes = [_pipeline(fixture_files, threads=2), _pipeline(fixture_files, precision="int8", threads=2)]
    pipes[1]("loaded before")  # one loads its weights inside its thread, one before
    flags = lambda: (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)  # noqa: E731
    before = flags()
    running = threading.Semaphore(0)
    done = threading.Event()
    seen = []

    def observe() -> None:
        torch.set_num_threads(3)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = True, False
        for _ in pipes:
            running.release()
        while not done.is_set():
            seen.append((torch.get_num_threads(), flags()))
            time.sleep(0.0005)
        seen.append((torch.get_num_threads(), flags()))

    finished = []

    def run(item):
        if item == "observer":
            return observe()
        running.acquire()  # the observer has set its own settings
        try:
            for _ in range(3):
                list(item.pipe(texts, batch_size=2))
        finally:
            finished.append(item)
            if len(finished) == len(pipes):
                done.set()

    try:
        run_in_threads(run, ["observer", *pipes], n_threads=3, deadline_s=300)
        fresh = []
        thread = threading.Thread(target=lambda: fresh.append(torch.get_num_threads()))
        thread.start()
        thread.join(timeout=60)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
        torch.set_num_threads(1)  # conftest's setting, for the threads of later tests
    assert len(seen) > 2 and set(seen) == {(3, (True, False))}, sorted(set(seen))
    assert fresh == [3]


# The user's pattern that hung forever: multi-threaded torch work in the parent, then a fresh
# pipeline (weights not loaded yet) and nlp.pipe(n_process=2). The bundled model: its weight load
# runs parallel copies, the first parallel op of each worker.
PARENT_MATMUL_THEN_WORKERS = """
import sys, warnings, multiprocessing as mp
import numpy as np, spacy, torch

if __name__ == "__main__":
    mp.set_start_method(sys.argv[1], force=True)
    assert torch.get_num_threads() == 2
    a = torch.randn(1000, 1000)
    (a @ a).sum()
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    texts = ["The river bank flooded .", "The bank raised its rates ."] * 4
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        docs = list(nlp.pipe(texts, n_process=2, batch_size=2))
    expected = [doc._.elmo for doc in nlp.pipe(texts)]
    assert all(np.allclose(d._.elmo, e, atol=1e-5) for d, e in zip(docs, expected))
    assert all(np.allclose(d[1].vector, e[1], atol=1e-5) for d, e in zip(docs, expected))
    print("ok", len(docs), [str(w.message)[:60] for w in caught])
"""


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_workers_after_parallel_torch_work_in_the_parent_finish(tmp_path, start_method):
    """No hang under any start method (fork: each child sets one thread in an at-fork handler,
    before its first torch op), the workers' vectors equal the parent's, and no W109 from the
    workers (nor from spaCy's transfer of the docs). A deadline kills the whole process group, so a
    hang fails this test in two minutes instead of stalling the suite."""
    import os
    import signal
    import subprocess
    import sys

    script = tmp_path / "parent_matmul_then_workers.py"
    script.write_text(PARENT_MATMUL_THEN_WORKERS)
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    env.pop("PYTHONWARNINGS", None)
    job = subprocess.Popen(
        [sys.executable, str(script), start_method], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )
    try:
        out, err = job.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.communicate()
        pytest.fail(f"nlp.pipe(n_process=2) with {start_method} hung (killed after 120 s)")
    assert job.returncode == 0, err[-3000:]
    assert out.startswith("ok 8 "), out
    assert "W109" not in out + err, err[-3000:]


# The biLM's own threads: the two directions (and shards of the batch) side by side.
SENTENCES = [
    ["The", "bank", "raised", "its", "rates", "."],
    ["A", "river", "bank", "."],
    ["unseen-word", "🙂", "日本語", "x" * 60],
    ["One"],
    ["The", "cat", "sat", "on", "the", "mat", "near", "the", "river", "bank", "."],
]


def _bilm_layers(runner, sentences, threads):
    from spacy_elmo import batch_to_ids

    runner.threads = threads
    with torch.no_grad():
        return runner(torch.from_numpy(batch_to_ids(sentences)))[0]


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_any_thread_count_gives_the_one_thread_layers(fixture_files, precision):
    """Each row's ops are the one-thread path's ops, wherever they run: equal up to float
    rounding (fp32, 1e-5), and run to run bit for bit."""
    from spacy_elmo import BiLMRunner, load_bilm

    bilm = BiLMRunner(load_bilm(*fixture_files), precision)
    with torch_threads(1):
        reference = _bilm_layers(bilm, SENTENCES, 1)
    for threads in (2, 3, 4, 8):
        layers = _bilm_layers(bilm, SENTENCES, threads)
        torch.testing.assert_close(layers, reference, atol=1e-5, rtol=0)
        assert torch.equal(layers, _bilm_layers(bilm, SENTENCES, threads))


def test_stateful_mode_carries_the_same_states_with_threads(fixture_files):
    from spacy_elmo import BiLMRunner, load_bilm

    runs = []
    for threads in (1, 4):
        bilm = BiLMRunner(load_bilm(*fixture_files, stateful=True))
        with torch_threads(1):
            runs.append([_bilm_layers(bilm, batch, threads) for batch in (SENTENCES, SENTENCES[1:4], SENTENCES)])
    for one, four in zip(*runs):
        torch.testing.assert_close(four, one, atol=1e-5, rtol=0)


def test_the_split_runs_without_gradients_only_and_leaves_the_thread_count(fixture_files, two_threads, monkeypatch):
    """Training (gradients) runs as with one thread, on PyTorch's own setting; inference splits."""
    from spacy_elmo import BiLMRunner, batch_to_ids, load_bilm
    from spacy_elmo.nn import side_by_side as engine

    calls = []
    real = engine.run_side_by_side  # the token encoder's pieces and the directions both run there
    monkeypatch.setattr(engine, "run_side_by_side", lambda tasks: calls.append(len(tasks)) or real(tasks))
    bilm = BiLMRunner(load_bilm(*fixture_files), threads=4)
    layers, _ = bilm(torch.from_numpy(batch_to_ids(SENTENCES)))
    layers.sum().backward()
    assert calls == [] and torch.get_num_threads() == 2
    _bilm_layers(bilm, SENTENCES, 4)
    # the char CNN's chunks in up to 4 pieces, then 2 shards x 2 directions
    assert len(calls) == 2 and 2 <= calls[0] <= 4 and calls[1] == 4 and torch.get_num_threads() == 2


@pytest.mark.parametrize("bad", ["four", "Auto", 1.5])
def test_bad_thread_words_name_the_key(fixture_files, bad):
    options, weights = fixture_files
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match="threads"):
        nlp.add_pipe("elmo", config={"model": {"options_file": str(options), "weight_file": str(weights), "threads": bad}})


def test_a_forked_child_drops_the_parents_workers():
    import multiprocessing as mp

    from spacy_elmo.nn import threads

    assert threads.run_side_by_side([lambda: 1, lambda: 2, lambda: 3]) == [1, 2, 3]
    assert threads._pool is not None
    with mp.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_child_pool_state).get(timeout=120) == (True, 1, [1, 2])


def _child_pool_state():
    from spacy_elmo.nn import threads

    dropped = threads._pool is None
    return dropped, torch.get_num_threads(), threads.run_side_by_side([lambda: 1, lambda: 2])


@pytest.fixture
def fresh_thread_warning(monkeypatch):
    """The once-per-process warning not yet given in this process (another test may have)."""
    from spacy_elmo.nn import thread_warning

    monkeypatch.setattr(thread_warning, "_warned", False)
    monkeypatch.setattr("spacy_elmo.layers.bilm_model.auto_threads", lambda: 2)  # a 2-core machine
    monkeypatch.setattr("spacy_elmo.nn.threads.usable_cores", lambda: 2)


def test_without_per_thread_counts_auto_falls_back_and_warns_once(fixture_files, two_threads, fresh_thread_warning, monkeypatch):
    """Where PyTorch's OpenMP runtime is out of reach (no per-thread count: Windows), threads =
    "auto" leaves a process on PyTorch's default count on PyTorch's own intra-op threads, the path
    that collapses beside a busy process: the pipe says so once per process, naming the fix, and
    still does not touch the setting."""
    from spacy_elmo.nn.thread_warning import CompetingThreadsWarning

    monkeypatch.setattr("spacy_elmo.nn.threads._thread_counts", lambda: None)
    with pytest.warns(CompetingThreadsWarning) as record:
        nlp = _pipeline(fixture_files)
        list(nlp.pipe(["One doc .", "Another doc ."], batch_size=1))
        _pipeline(fixture_files)("A second pipeline in the same process .")
    assert len(record) == 1 and nlp.get_pipe("elmo").runner.threads == 1
    message = str(record[0].message)
    assert "torch.set_num_threads(1)" in message and "OMP_NUM_THREADS=1" in message
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("threads", ["auto", 1, 2])
def test_no_thread_warning_on_one_op_thread_or_a_chosen_split(fixture_files, fresh_thread_warning, threads):
    """Per-thread counts (or one op thread, the fix) never warn; nor does a number the user chose,
    whatever PyTorch's count."""
    import warnings

    from spacy_elmo.nn import threads as thread_module

    before = torch.get_num_threads()
    for torch_count in (1, 2) if threads != "auto" or thread_module._thread_counts() is not None else (1,):
        torch.set_num_threads(torch_count)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                _pipeline(fixture_files, threads=threads)("No warning here .")
        finally:
            torch.set_num_threads(before)
