"""The baseline of ``benchmarks load``: reading a bilm-tf HDF5 file the way AllenNLP's ELMo does.

AllenNLP first builds every module with random initial weights, then reads the datasets and
copies each (transposed, gate blocks reordered) into its parameter. AllenNLP opens the HDF5 file
once per convolution, once per highway layer and once for all LSTM weights; this baseline opens
it for every tensor, which costs about 10 ms more on the original shape. The LSTM kernel ``W_0``
is read once for both the input and the recurrent weights, as AllenNLP does. Its time includes
building the random-weight modules (about 0.5 s of a warm 1.2 s on the original shape), which
``load_bilm`` skips by building on the ``meta`` device: the ratio is of "build + read". This
module does the same, in the package's parameter layout, written from the format description
(``REFERENCE.md``), not from either code base. It is
also a second, independent reading of the format: the tests check that it gives exactly the
tensors of ``spacy_elmo.load_bilm``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Tuple, Union

import h5py
import numpy as np
import torch

from spacy_elmo.nn.bilm import BiLM
from spacy_elmo.options import BiLMOptions

PathLike = Union[str, Path]
Convert = Callable[[np.ndarray], np.ndarray]


def _read(weight_file: PathLike, name: str) -> np.ndarray:
    """One dataset, from a file opened for this read alone."""
    with h5py.File(weight_file, "r") as handle:
        return handle[name][...]


def _tf_gates_to_torch(array: np.ndarray, hidden: int) -> np.ndarray:
    """Gate blocks along axis 0: TensorFlow's (i, j, f, o) -> torch's (i, f, g=j, o)."""
    i, j, f, o = np.split(array, 4, axis=0)
    assert i.shape[0] == hidden
    return np.concatenate([i, f, j, o], axis=0)


def load_bilm_per_tensor(options_file: PathLike, weight_file: PathLike) -> BiLM:
    """A biLM (eval mode) built with random weights, then overwritten tensor by tensor."""
    options = BiLMOptions.from_file(options_file)
    bilm = BiLM(options)
    params = dict(bilm.named_parameters())

    def copy(target: torch.Tensor, dataset: str, convert: Convert) -> None:
        copy_many(dataset, (target, convert))

    def copy_many(dataset: str, *targets: Tuple[torch.Tensor, Convert]) -> None:
        """Read ``dataset`` once and fill each target with its own view of it."""
        array = _read(weight_file, dataset)
        for target, convert in targets:
            with torch.no_grad():
                target.copy_(torch.from_numpy(np.ascontiguousarray(convert(array), dtype=np.float32)))

    same = lambda a: a  # noqa: E731
    cnn, lstm = options.char_cnn, options.lstm
    embedding = params["token_encoder.char_embedding.weight"]
    with torch.no_grad():
        embedding[0].zero_()  # the all-padding token
    copy(embedding[1:], "char_embed", same)
    for i in range(len(cnn.filters)):
        # (1, width, char_dim, n) -> Conv1d (n, char_dim, width)
        conv = params[f"token_encoder.convolutions.{i}.weight"]
        copy(conv, f"CNN/W_cnn_{i}", lambda a: a[0].transpose(2, 1, 0))
        copy(params[f"token_encoder.convolutions.{i}.bias"], f"CNN/b_cnn_{i}", same)
    d = cnn.n_filters
    for k in range(cnn.n_highway):
        weight = params[f"token_encoder.highways.{k}.linear.weight"]  # [transform; carry] (2d, d)
        bias = params[f"token_encoder.highways.{k}.linear.bias"]
        copy(weight[:d], f"CNN_high_{k}/W_transform", np.transpose)
        copy(weight[d:], f"CNN_high_{k}/W_carry", np.transpose)
        copy(bias[:d], f"CNN_high_{k}/b_transform", same)
        copy(bias[d:], f"CNN_high_{k}/b_carry", same)
    copy(params["token_encoder.projection.weight"], "CNN_proj/W_proj", np.transpose)
    copy(params["token_encoder.projection.bias"], "CNN_proj/b_proj", same)

    h, p = lstm.dim, lstm.projection_dim
    for direction, name in enumerate(("forward_lstm", "backward_lstm")):
        for layer in range(lstm.n_layers):
            cell = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
            key = f"{name}.layers.{layer}"
            # W_0 (input + projection, 4h): rows of the input, then of the recurrent state.
            copy_many(
                f"{cell}/W_0",
                (params[f"{key}.weight_ih_l0"], lambda a: _tf_gates_to_torch(a[:p].T, h)),
                (params[f"{key}.weight_hh_l0"], lambda a: _tf_gates_to_torch(a[p:].T, h)),
            )

            def bias_with_forget(a: np.ndarray) -> np.ndarray:
                b = _tf_gates_to_torch(a, h).copy()
                b[h : 2 * h] += 1.0  # TensorFlow adds forget_bias=1.0 at run time
                return b

            copy(params[f"{key}.bias_ih_l0"], f"{cell}/B", bias_with_forget)
            with torch.no_grad():
                params[f"{key}.bias_hh_l0"].zero_()
            copy(params[f"{key}.weight_hr_l0"], f"{cell}/W_P_0", np.transpose)
    return bilm.eval()
