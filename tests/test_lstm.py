"""The LSTM with projection and clipping (``spacy_elmo.nn.lstm``): one direction, checked
against a step-by-step loop of the cell equations in NumPy."""

from __future__ import annotations

import numpy as np
import torch

from spacy_elmo.nn.lstm import DirectionalLSTM, reverse_padded


def _step_by_step(layer, x, clip):
    """h_t = clip(W_hr (o * tanh c_t)), c_t = clip(f c + i g), torch's gate order i, f, g, o."""
    w_ih, w_hh = layer.weight_ih_l0.detach().cpu().numpy(), layer.weight_hh_l0.detach().cpu().numpy()
    b = (layer.bias_ih_l0 + layer.bias_hh_l0).detach().cpu().numpy()
    w_hr = layer.weight_hr_l0.detach().cpu().numpy()
    hidden = layer.hidden_size
    h, c, out = np.zeros(w_hr.shape[0]), np.zeros(hidden), []
    sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    for x_t in x:
        gates = w_ih @ x_t + w_hh @ h + b
        i, f, g, o = (gates[k * hidden : (k + 1) * hidden] for k in range(4))
        c = np.clip(sigmoid(f) * c + sigmoid(i) * np.tanh(g), -clip, clip)
        h = np.clip(w_hr @ (sigmoid(o) * np.tanh(c)), -clip, clip)
        out.append(h)
    return np.array(out)


def _lstm(go_forward: bool, device: torch.device) -> DirectionalLSTM:
    torch.manual_seed(0)
    lstm = DirectionalLSTM(4, 6, 3, num_layers=1, cell_clip=0.5, proj_clip=0.5, go_forward=go_forward)
    with torch.no_grad():
        for p in lstm.parameters():
            p.mul_(3)  # large enough that the clips bite
    return lstm.to(device)


def _run(lstm: DirectionalLSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The top layer's output in float32 (on CUDA with TF32 off: the `device` fixture), back on
    the CPU."""
    device = next(lstm.parameters()).device
    (out,), _ = lstm(x.to(device), lengths.to(device))
    return out.detach().cpu()


def test_forward_direction_is_the_cell_equations_with_clipping(device):
    lstm = _lstm(go_forward=True, device=device)
    x = torch.randn(2, 5, 4)
    lengths = torch.tensor([5, 3])
    out = _run(lstm, x, lengths)
    for row, n in enumerate(lengths.tolist()):
        expected = _step_by_step(lstm.layers[0], x[row, :n].numpy(), 0.5)
        np.testing.assert_allclose(out[row, :n].numpy(), expected, rtol=1e-4, atol=1e-5)
        assert (out[row, n:] == 0).all()
    assert out.abs().max() <= 0.5


def test_backward_direction_reads_each_row_from_its_last_token(device):
    lstm = _lstm(go_forward=False, device=device)
    x = torch.randn(2, 5, 4)
    lengths = torch.tensor([5, 2])
    out = _run(lstm, x, lengths)
    for row, n in enumerate(lengths.tolist()):
        expected = _step_by_step(lstm.layers[0], x[row, :n].numpy()[::-1], 0.5)[::-1]
        np.testing.assert_allclose(out[row, :n].numpy(), expected, rtol=1e-4, atol=1e-5)


def test_reverse_padded_keeps_padding_in_place():
    x = torch.arange(8.0).reshape(2, 4, 1)
    reversed_ = reverse_padded(x, torch.tensor([4, 2]))
    assert reversed_[:, :, 0].tolist() == [[3, 2, 1, 0], [5, 4, 6, 7]]


def test_dense_loop_is_the_cell_equations_and_freezes_finished_rows(device):
    """``forward_dense`` (the loop CUDA graphs record: every row every step) against the NumPy
    loop, per row; padding zero; a row of length 0 stays zero; final states are each row's last."""
    for go_forward in (True, False):
        lstm = _lstm(go_forward=go_forward, device=device)
        x = torch.randn(3, 6, 4)
        lengths = torch.tensor([6, 2, 0])
        x[1, 2:] = 0
        x[2] = 0
        valid = torch.arange(6)[None, :] < lengths[:, None]
        with torch.no_grad():
            (out,), ((h, _),) = lstm.forward_dense(x.to(device), lengths.to(device), valid.to(device))
        out, h = out.cpu(), h.cpu()
        for row, n in enumerate(lengths.tolist()[:2]):
            reading = x[row, :n].numpy() if go_forward else x[row, :n].numpy()[::-1]
            expected = _step_by_step(lstm.layers[0], reading, 0.5)
            np.testing.assert_allclose(h[row].numpy(), expected[-1], rtol=1e-4, atol=1e-5)
            if not go_forward:
                expected = expected[::-1]
            np.testing.assert_allclose(out[row, :n].numpy(), expected, rtol=1e-4, atol=1e-5)
            assert (out[row, n:] == 0).all()
        assert (out[2] == 0).all() and (h[2] == 0).all()


def test_dense_loop_equals_the_packed_loop_with_two_layers_and_skip_connections(device):
    torch.manual_seed(1)
    for go_forward in (True, False):
        lstm = DirectionalLSTM(5, 7, 5, num_layers=2, cell_clip=1.0, proj_clip=1.0, go_forward=go_forward)
        lstm = lstm.to(device)
        lengths = torch.tensor([4, 9, 1, 6])
        valid = torch.arange(9)[None, :] < lengths[:, None]
        x = torch.randn(4, 9, 5) * valid[:, :, None]
        with torch.no_grad():
            packed, packed_states = lstm(x.to(device), lengths.to(device))
            dense, dense_states = lstm.forward_dense(x.to(device), lengths.to(device), valid.to(device))
        for a, b in zip(packed, dense):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
        for (h_a, c_a), (h_b, c_b) in zip(packed_states, dense_states):
            torch.testing.assert_close(h_b, h_a, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(c_b, c_a, rtol=1e-5, atol=1e-6)
