"""The LSTM stacks as CUDA graphs (``spacy_elmo.nn.cuda_graphs``): the graphed biLM against its
eager loop, on ``--device`` (on the CPU the graphs never apply, which is checked too)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from conftest import run_in_threads
from spacy_elmo import BiLMRunner, batch_to_ids, load_bilm
from spacy_elmo.nn.cuda_graphs import MAX_GRAPHS, MAX_ROWS, bucket_length, bucket_rows, pays_off

WORDS = "the bank raised its rates as the river rose over the bank of the Spree".split()


def _sentences(n: int, seed: int):
    rng = np.random.default_rng(seed)
    return [list(rng.choice(WORDS, size=int(rng.integers(1, 30)))) for _ in range(n)]


def _layers(bilm, sentences, graphs: bool) -> torch.Tensor:
    device = next(bilm.parameters()).device
    bilm.cuda_graphs = graphs
    with torch.no_grad():
        layers, _ = bilm(torch.from_numpy(batch_to_ids(sentences)).to(device))
    return layers.cpu()


def _graphs_only(device: torch.device) -> None:
    """Skip on the CPU, where graphs never apply: there both sides of the comparison are the same
    eager loop (``test_graphed_layers_equal_the_eager_loop`` checks that, bit for bit)."""
    if device.type != "cuda":
        pytest.skip("on the CPU the graphs never apply, so graphed and eager are one path: run with --device cuda")


@pytest.fixture()
def bilm(fixture_files, device):
    """The fixture model in a runner, which chooses the graphs."""
    return BiLMRunner(load_bilm(*fixture_files, device=device))


def test_buckets_cover_the_batch_and_waste_at_most_a_third():
    rows = {bucket_rows(n) for n in range(1, 4097)}
    assert len(rows) <= 24  # a pipe meets few shapes
    for n in range(1, 4097):
        size = bucket_rows(n)
        assert size >= n
        assert n <= 8 or (size - n) / size < 1 / 3, (n, size)
        assert bucket_length(n) >= n and bucket_length(n) % 8 == 0 and bucket_length(n) - n < 8
    assert pays_off(MAX_ROWS) and not pays_off(MAX_ROWS + 1)


def test_graphed_layers_equal_the_eager_loop(bilm, device):
    """Batches of 3, 9 and 17 sentences (three buckets), and the first again (a replay)."""
    batches = [_sentences(n, seed) for seed, n in enumerate((3, 9, 17))] + [_sentences(3, 0)]
    for sentences in batches:
        eager = _layers(bilm, sentences, graphs=False)
        graphed = _layers(bilm, sentences, graphs=True)
        if device.type == "cuda":
            torch.testing.assert_close(graphed, eager, rtol=1e-5, atol=1e-5)
        else:  # the switch is ignored: the same loop, bit for bit
            assert torch.equal(graphed, eager)
    if device.type == "cuda":
        assert sorted(key[:2] for key in bilm._graphs._graphs) == [(8, 32), (12, 32), (24, 32)]  # (rows, length)
    else:
        assert bilm._graphs is None  # the CPU runs the packed loop


def test_graphs_follow_weights_that_moved_and_precision(bilm, device):
    _graphs_only(device)
    sentences = _sentences(5, 3)
    before = _layers(bilm, sentences, graphs=True)
    with torch.no_grad():
        for p in bilm.bilm.forward_lstm.parameters():
            p.mul_(0.5)  # in place: the recorded graph reads the new values
    halved = _layers(bilm, sentences, graphs=True)
    torch.testing.assert_close(halved, _layers(bilm, sentences, graphs=False), rtol=1e-5, atol=1e-5)
    assert (halved - before).abs().max() > 1e-3
    bilm.to("cpu").to(device)  # new tensors at new addresses
    torch.testing.assert_close(_layers(bilm, sentences, graphs=True), halved, rtol=1e-5, atol=1e-5)
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        bilm.precision = "bf16"
        graphed, eager = _layers(bilm, sentences, graphs=True), _layers(bilm, sentences, graphs=False)
        cosine = torch.nn.functional.cosine_similarity(graphed[1:], eager[1:], dim=-1)
        assert cosine[eager[1:].norm(dim=-1) > 0].min() > 0.999


def test_concurrent_callers_get_their_own_outputs(bilm):
    """A web server's threads on one biLM: each gets what it gets alone."""
    batches = [_sentences(n, 10 + n) for n in (2, 5, 7, 11)]
    alone = [_layers(bilm, b, graphs=True) for b in batches]

    def work(sentences):
        for _ in range(3):
            with torch.no_grad():
                layers, _ = bilm(torch.from_numpy(batch_to_ids(sentences)).to(next(bilm.parameters()).device))
        return layers.cpu()

    got = run_in_threads(work, batches, n_threads=len(batches))
    for a, b in zip(got, alone):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_stateful_and_copies_run_as_before(fixture_files, device):
    """A stateful biLM's first batch (zero states) is graphed and hands its final states on; a deep
    copy leaves the recorded graphs behind and records its own."""
    _graphs_only(device)
    batches = [_sentences(4, 20), _sentences(4, 21)]
    runs = []
    for graphs in (True, False):
        bilm = BiLMRunner(load_bilm(*fixture_files, device=device, stateful=True))
        runs.append([_layers(bilm, b, graphs=graphs) for b in batches])
    for a, b in zip(*runs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    bilm = BiLMRunner(load_bilm(*fixture_files, device=device))
    first = _layers(bilm, batches[0], graphs=True)
    twin = copy.deepcopy(bilm)
    assert twin._graphs is None
    torch.testing.assert_close(_layers(twin, batches[0], graphs=True), first, rtol=1e-5, atol=1e-5)


def test_graphs_kept_are_bounded(bilm, device):
    if device.type != "cuda":
        assert _layers(bilm, _sentences(2, 0), graphs=True).shape[1] == 2
        assert bilm._graphs is None
        return
    for n in range(1, 3 * MAX_GRAPHS):
        _layers(bilm, [["word"] * n], graphs=True)  # lengths n + 2: a new bucket every 8
    assert len(bilm._graphs) <= MAX_GRAPHS
    kept = list(bilm._graphs._graphs)
    many = _sentences(MAX_ROWS + 1, 5)
    torch.testing.assert_close(_layers(bilm, many, graphs=True), _layers(bilm, many, graphs=False))
    assert list(bilm._graphs._graphs) == kept  # a large batch runs the eager loop
