"""An independent NumPy re-implementation of the bilm-tf biLM, used as the oracle in parity tests.

It reads the HDF5 datasets directly and follows TensorFlow's formulas one sentence and one time
step at a time (``LSTMCell``: gates (i, j, f, o) from ``[x, h] @ W_0 + B``, ``forget_bias`` 1.0
added at run time; highway ``carry * relu(...) + (1 - carry) * x``). It shares no code with
spacy_elmo: even the character ids are built here, per character, from the published mapping.
Computation is in float64 so that the oracle's own rounding does not count against the package.
"""

from __future__ import annotations

import json
from typing import List

import h5py
import numpy as np


def char_ids(token: str) -> np.ndarray:
    """bilm-tf's UnicodeCharsVocabulary ids for one token, +1 (AllenNLP's shift)."""
    specials = {"<S>": 256, "</S>": 257}
    ids = [260] * 50
    ids[0] = 258
    if token in specials:
        ids[1], ids[2] = specials[token], 259
    else:
        data = token.encode("utf-8", "ignore")[:48]
        for k, byte in enumerate(data, start=1):
            ids[k] = byte
        ids[len(data) + 1] = 259
    return np.array(ids) + 1


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class NumpyBiLM:
    def __init__(self, options_file: str, weight_file: str) -> None:
        with open(options_file) as f:
            self.options = json.load(f)
        with h5py.File(weight_file, "r") as f:
            self.w = {}
            f.visititems(
                lambda n, o: self.w.__setitem__(n, o[()].astype(np.float64))
                if isinstance(o, h5py.Dataset)
                else None
            )

    def token_embedding(self, token: str) -> np.ndarray:
        cnn = self.options["char_cnn"]
        table = np.concatenate([np.zeros((1, cnn["embedding"]["dim"])), self.w["char_embed"]])
        x = table[char_ids(token)]  # (50, e)
        act = np.tanh if cnn["activation"] == "tanh" else (lambda v: np.maximum(v, 0.0))
        pooled = []
        for i, (width, _) in enumerate(cnn["filters"]):
            kernel = self.w[f"CNN/W_cnn_{i}"][0]  # (w, e, n)
            conv = np.stack(
                [np.einsum("we,wen->n", x[p : p + width], kernel) for p in range(50 - width + 1)]
            ) + self.w[f"CNN/b_cnn_{i}"]
            pooled.append(act(conv.max(axis=0)))
        h = np.concatenate(pooled)
        for k in range(cnn["n_highway"]):
            g = f"CNN_high_{k}/"
            carry = _sigmoid(h @ self.w[g + "W_carry"] + self.w[g + "b_carry"])
            transform = np.maximum(h @ self.w[g + "W_transform"] + self.w[g + "b_transform"], 0.0)
            h = carry * transform + (1.0 - carry) * h
        return h @ self.w["CNN_proj/W_proj"] + self.w["CNN_proj/b_proj"]

    def _lstm(self, direction: int, layer: int, inputs: np.ndarray) -> np.ndarray:
        opts = self.options["lstm"]
        prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
        kernel, bias, proj = (self.w[prefix + n] for n in ("W_0", "B", "W_P_0"))
        dim, p = opts["dim"], opts["projection_dim"]
        c, m = np.zeros(dim), np.zeros(p)
        out = []
        for x in inputs:
            z = np.concatenate([x, m]) @ kernel + bias
            i, j, f, o = (z[k * dim : (k + 1) * dim] for k in range(4))
            c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
            if opts.get("cell_clip"):
                c = np.clip(c, -opts["cell_clip"], opts["cell_clip"])
            m = (_sigmoid(o) * np.tanh(c)) @ proj
            if opts.get("proj_clip"):
                m = np.clip(m, -opts["proj_clip"], opts["proj_clip"])
            out.append(m)
        return np.stack(out)

    def layers(self, tokens: List[str]) -> np.ndarray:
        """(n_layers + 1, len(tokens), 2 * projection_dim), boundary tokens removed."""
        opts = self.options["lstm"]
        x = np.stack([self.token_embedding(t) for t in ["<S>", *tokens, "</S>"]])
        result = [np.concatenate([x, x], axis=-1)]
        fw, bw = x, x[::-1]
        for layer in range(opts["n_layers"]):
            new_fw, new_bw = self._lstm(0, layer, fw), self._lstm(1, layer, bw)
            if layer > 0 and opts.get("use_skip_connections", True):
                new_fw, new_bw = new_fw + fw, new_bw + bw
            fw, bw = new_fw, new_bw
            result.append(np.concatenate([fw, bw[::-1]], axis=-1))
        return np.stack(result)[:, 1:-1]
