"""The LSTM with projection and clipping (``spacy_elmo.nn.lstm``): one direction, checked
against a step-by-step loop of the cell equations in NumPy."""

from __future__ import annotations

import numpy as np
import torch

from spacy_elmo.nn.lstm import DirectionalLSTM, reverse_padded
from spacy_elmo.nn.precision import precision_context


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
    """The top layer's output in float32 (TF32 off, as the biLM runs it), back on the CPU."""
    device = next(lstm.parameters()).device
    with precision_context("fp32", device):
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
