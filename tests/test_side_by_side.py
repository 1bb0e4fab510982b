"""The one engine that runs the biLM's directions side by side (``spacy_elmo.nn.side_by_side``):
on threads (the CPU) and on CUDA streams it computes what one after the other computes, values
and gradients."""

import pytest
import torch

from spacy_elmo.nn.lstm import DirectionalLSTM
from spacy_elmo.nn.side_by_side import how_to_run, run_side_by_side_of


def _directions(device):
    torch.manual_seed(0)
    return [
        DirectionalLSTM(6, 16, 8, num_layers=2, cell_clip=1.0, proj_clip=1.0).to(device) for _ in range(2)
    ]


def _run(lstms, x, how):
    runs = [lambda x, lstm=lstm: lstm(x)[0][-1] for lstm in lstms]
    params = [list(lstm.parameters()) for lstm in lstms]
    outputs = run_side_by_side_of(runs, x, how, params)
    (outputs[0].square().sum() + outputs[1].sum()).backward()
    grads = [p.grad.clone() for ps in params for p in ps] + [x.grad.clone()]
    for ps in params:
        for p in ps:
            p.grad = None
    x.grad = None
    return [o.detach() for o in outputs], grads


@pytest.mark.parametrize("how", ["threads", "streams"])
def test_side_by_side_computes_what_one_after_the_other_computes(device, how):
    if how == "streams" and device.type != "cuda":
        pytest.skip("CUDA streams: --device cuda")
    if how == "threads" and device.type != "cpu":
        pytest.skip("threads: the CPU's way")
    lstms = _directions(device)
    x = torch.randn(3, 7, 6, device=device, requires_grad=True)
    outputs, grads = _run(lstms, x, "sequential")
    outputs2, grads2 = _run(lstms, x, how)
    for a, b in zip(outputs + grads, outputs2 + grads2):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


def test_the_way_is_picked_by_the_device():
    assert how_to_run(torch.device("cpu"), 1) == "sequential"
    assert how_to_run(torch.device("cpu"), 2) == "threads"
    assert how_to_run(torch.device("cuda"), 1, streams=True) == "streams"
    assert how_to_run(torch.device("cuda"), 1) == "sequential"
    with pytest.raises(ValueError, match="how must be one of"):
        run_side_by_side_of([], torch.zeros(1), "fibers")


def test_threads_run_on_one_pytorch_thread_each_for_a_caller_that_owns_its_process():
    """Pretraining (``one_thread_each``) sets PyTorch's thread count to 1 while its threads run
    and puts it back (a pipe's runner leaves the process's count alone: what a worker thread
    then sees is OpenMP's business)."""
    from spacy_elmo.nn.threads import torch_threads

    counts = [lambda _: torch.get_num_threads()] * 2
    with torch_threads(2), torch.no_grad():
        assert run_side_by_side_of(counts, torch.zeros(1), "threads", one_thread_each=True) == [1, 1]
        assert torch.get_num_threads() == 2
