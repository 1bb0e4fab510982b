"""A plain, per-time-step biLM in AllenNLP's style: the baseline of ``benchmarks inference`` and an
independent check of the package's numbers.

Written from the formulas (``REFERENCE.md``; Peters et al. 2018; the bilm-tf cell), not from the
package's code paths, in the way AllenNLP's ELMo runs them:

- the character CNN over all 50 character positions of every position of the padded batch,
  boundary tokens and padding included (masked afterwards); the transform and carry halves of
  each highway layer as two products (AllenNLP fuses them into one ``Linear(d, 2d)``: the same
  arithmetic);
- each LSTM layer as a Python loop over time steps of the padded batch, rows sorted by length:
  at each step, the input product and the state product of the rows still running
  (``batch_lengths``; the backward direction starts each row at its own last token), gates,
  cell clip, projection, projection clip; residual connections from the second layer on.

It keeps AllenNLP's algorithm and cost profile but not its autograd bookkeeping (AllenNLP also
clones the whole state tensor at every step), so the speed ratios it gives are conservative.

Weights come from a package ``BiLM`` (its parameters, in torch's layout: gates i, f, g, o).
"""

from __future__ import annotations

from typing import Dict, List

import torch
from torch.nn import functional as F

from spacy_elmo.nn.bilm import BiLM

# bilm-tf's character mapping, +1: begin-of-word, the sentence marker, end-of-word, padding.
_BOW, _EOW, _PAD, _BOS, _EOS = 259, 260, 261, 257, 258


def _boundary_token(marker: int, like: torch.Tensor) -> torch.Tensor:
    ids = torch.full((like.shape[-1],), _PAD, dtype=like.dtype, device=like.device)
    ids[:3] = torch.tensor([_BOW, marker, _EOW])
    return ids


class ReferenceBiLM:
    """``ReferenceBiLM(bilm)(char_ids)`` returns the same ``(n_layers + 1, batch, max_len,
    2 * projection_dim)`` layers as ``bilm(char_ids)[0]`` (stateless, padding rows zero)."""

    def __init__(self, bilm: BiLM) -> None:
        options = bilm.options
        self.activation = torch.relu if options.char_cnn.activation == "relu" else torch.tanh
        self.n_layers = options.lstm.n_layers
        self.cell_clip = options.lstm.cell_clip
        self.proj_clip = options.lstm.proj_clip
        self.skip = options.lstm.use_skip_connections
        self.p: Dict[str, torch.Tensor] = {k: v.detach() for k, v in bilm.state_dict().items()}
        self.n_filters = options.char_cnn.n_filters
        self.n_convolutions = len(options.char_cnn.filters)
        self.n_highway = options.char_cnn.n_highway

    @torch.no_grad()
    def __call__(self, char_ids: torch.Tensor) -> torch.Tensor:
        char_ids = char_ids.long()
        lengths = (char_ids > 0).any(dim=-1).sum(dim=1)
        batch, max_len, _ = char_ids.shape
        ids = self._add_boundaries(char_ids, lengths)
        lengths = lengths + 2
        mask = torch.arange(max_len + 2, device=ids.device)[None, :] < lengths[:, None]
        tokens = self.token_vectors(ids) * mask[..., None].to(torch.float32)

        forward = self._direction(tokens, lengths, "forward_lstm", go_forward=True)
        backward = self._direction(tokens, lengths, "backward_lstm", go_forward=False)
        layers = [torch.cat([tokens, tokens], dim=-1)]
        layers += [torch.cat([f, b], dim=-1) for f, b in zip(forward, backward)]
        out = torch.stack(layers)[:, :, 1 : max_len + 1]
        real = torch.arange(max_len, device=ids.device)[None, :] < (lengths - 2)[:, None]
        return out * real[None, :, :, None].to(out.dtype)

    def _add_boundaries(self, char_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        batch, max_len, width = char_ids.shape
        ids = torch.zeros((batch, max_len + 2, width), dtype=char_ids.dtype, device=char_ids.device)
        ids[:, 0] = _boundary_token(_BOS, char_ids)
        eos = _boundary_token(_EOS, char_ids)
        for row in range(batch):
            n = int(lengths[row])
            ids[row, 1 : n + 1] = char_ids[row, :n]
            ids[row, n + 1] = eos
        return ids

    def token_vectors(self, ids: torch.Tensor) -> torch.Tensor:
        """(batch, T, 50) ids -> (batch, T, projection_dim), every position computed."""
        p = self.p
        batch, steps, width = ids.shape
        flat = ids.reshape(batch * steps, width)
        embedded = p["token_encoder.char_embedding.weight"][flat].transpose(1, 2)  # (N, e, 50)
        pooled = []
        for i in range(self.n_convolutions):
            conv = F.conv1d(
                embedded,
                p[f"token_encoder.convolutions.{i}.weight"],
                p[f"token_encoder.convolutions.{i}.bias"],
            )
            pooled.append(self.activation(conv.max(dim=-1).values))
        x = torch.cat(pooled, dim=-1)
        d = self.n_filters
        for k in range(self.n_highway):
            weight = p[f"token_encoder.highways.{k}.linear.weight"]
            bias = p[f"token_encoder.highways.{k}.linear.bias"]
            transform = x @ weight[:d].t() + bias[:d]
            carry = torch.sigmoid(x @ weight[d:].t() + bias[d:])
            x = carry * torch.relu(transform) + (1.0 - carry) * x
        x = x @ p["token_encoder.projection.weight"].t() + p["token_encoder.projection.bias"]
        return x.reshape(batch, steps, -1)

    def _direction(
        self, tokens: torch.Tensor, lengths: torch.Tensor, name: str, go_forward: bool
    ) -> List[torch.Tensor]:
        """All layers of one direction; rows are sorted by length for the loop and put back."""
        order = torch.argsort(lengths, descending=True, stable=True)
        restore = torch.argsort(order)
        x = tokens[order]
        sorted_lengths = lengths[order].tolist()
        outputs = []
        for layer in range(self.n_layers):
            y = self._layer(x, sorted_lengths, f"{name}.layers.{layer}", go_forward)
            if layer > 0 and self.skip:
                y = y + x
            outputs.append(y[restore])
            x = y
        return outputs

    def _layer(
        self, inputs: torch.Tensor, lengths: List[int], key: str, go_forward: bool
    ) -> torch.Tensor:
        """One LSTM layer, one time step at a time. inputs (batch, T, in), rows by decreasing
        length -> (batch, T, proj), zero past each row's length."""
        p = self.p
        w_in, w_state = p[f"{key}.weight_ih_l0"].t(), p[f"{key}.weight_hh_l0"].t()
        bias = p[f"{key}.bias_ih_l0"] + p[f"{key}.bias_hh_l0"]
        w_proj = p[f"{key}.weight_hr_l0"].t()
        hidden = w_state.shape[1] // 4
        batch, steps, _ = inputs.shape
        memory = inputs.new_zeros(batch, hidden)
        state = inputs.new_zeros(batch, w_proj.shape[1])
        output = inputs.new_zeros(batch, steps, w_proj.shape[1])
        for t in range(steps):
            index = t if go_forward else steps - 1 - t
            running = sum(1 for n in lengths if n > index)  # rows are sorted: a prefix
            if running == 0:
                continue
            projected_input = inputs[:running, index] @ w_in
            projected_state = state[:running] @ w_state + bias
            gates = projected_input + projected_state
            input_gate = torch.sigmoid(gates[:, :hidden])
            forget_gate = torch.sigmoid(gates[:, hidden : 2 * hidden])
            candidate = torch.tanh(gates[:, 2 * hidden : 3 * hidden])
            output_gate = torch.sigmoid(gates[:, 3 * hidden :])
            cell = input_gate * candidate + forget_gate * memory[:running]
            if self.cell_clip is not None:
                cell = torch.clamp(cell, -self.cell_clip, self.cell_clip)
            h = (output_gate * torch.tanh(cell)) @ w_proj
            if self.proj_clip is not None:
                h = torch.clamp(h, -self.proj_clip, self.proj_clip)
            memory[:running] = cell
            state[:running] = h
            output[:running, index] = h
        return output


def max_abs_differences(got: torch.Tensor, want: torch.Tensor) -> List[float]:
    """Per layer, the largest absolute difference: (n_layers, ...) tensors -> n_layers floats."""
    diff = (got.float() - want.float()).abs()
    return [float(d.max()) if d.numel() else 0.0 for d in diff]
