"""Weight files in and out: the released bilm-tf HDF5 layout and this package's native checkpoint.

bilm-tf layout (what ``bin/dump_weights.py`` wrote and AllenNLP reads), TensorFlow's ``x @ W``:

=============================================  ================  ================================
dataset                                         shape             here
=============================================  ================  ================================
``char_embed``                                  (261, e)          char_embedding.weight[1:]
``CNN/W_cnn_i``, ``CNN/b_cnn_i``                (1, w, e, n)      Conv1d weight (n, e, w)
``CNN_high_k/W_transform``, ``W_carry``, ``b_*``  (d, d), (d,)      Highway.linear [transform; carry]
``CNN_proj/W_proj``, ``b_proj``                 (d, p), (p,)      projection
``RNN_{dir}/RNN/MultiRNNCell/Cell{l}/LSTMCell/``
``W_0``                                         (in + p, 4h)      [weight_ih; weight_hh]^T
``B``                                           (4h,)             bias_ih (+1 on the forget gate)
``W_P_0``                                       (h, p)            weight_hr^T
=============================================  ================  ================================

TensorFlow's gate order is (i, j=candidate, f, o) and its LSTMCell adds ``forget_bias=1.0`` at run
time; torch's order is (i, f, g, o). ``dir`` is 0 for the forward LM and 1 for the backward LM.

Native checkpoint: a directory with ``options.json`` (the released layout) and
``model.safetensors`` (the ``BiLM`` state dict).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Dict, Iterator, Tuple, Union

import h5py
import numpy as np
import torch
from safetensors.torch import load_file, save_file

from .nn.bilm import BiLM
from .options import BiLMOptions

PathLike = Union[str, Path]
OPTIONS_NAME = "options.json"
SAFETENSORS_NAME = "model.safetensors"
HDF5_NAME = "weights.hdf5"
#: The vocabulary beside a pretrained model: one word per line, most frequent first.
VOCAB_NAME = "vocab.txt"

_KNOWN_DATASET = re.compile(
    r"^(char_embed|CNN/[Wb]_cnn_\d+|CNN_high_\d+/.*|CNN_proj/.*|RNN_\d/.*)$"
)


class WeightFileError(ValueError):
    """A weight file that is unreadable or does not match its options."""


#: What h5py raises on a damaged file, from lookups and reads alike: OSError (truncated data),
#: RuntimeError (a damaged symbol table), KeyError (a broken external link).
HDF5_READ_ERRORS = (OSError, RuntimeError, KeyError)


def build_bilm(
    options: BiLMOptions,
    state: Dict[str, torch.Tensor],
    source: str = "state dict",
    stateful: bool = False,
) -> BiLM:
    """A BiLM holding ``state`` without first filling random weights (fast for large models)."""
    with torch.device("meta"):
        bilm = BiLM(options, stateful=stateful)
    expected = bilm.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise WeightFileError(
            f"{source}: parameters do not match the options: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )
    for name, tensor in expected.items():
        if tuple(state[name].shape) != tuple(tensor.shape):
            raise WeightFileError(
                f"{source}: parameter '{name}' has shape {tuple(state[name].shape)}, the options "
                f"need {tuple(tensor.shape)}"
            )
    # Hold the weights in torch's own (64-byte aligned) memory: BLAS kernels round differently on
    # differently aligned buffers, and a model must give the same numbers however it was loaded.
    aligned = {k: v if _is_aligned(v) else _aligned_copy(v) for k, v in state.items()}
    bilm.load_state_dict(aligned, assign=True)
    return bilm


def _is_aligned(tensor: torch.Tensor) -> bool:
    return (
        tensor.dtype == torch.float32
        and tensor.device.type == "cpu"
        and tensor.is_contiguous()
        and tensor.data_ptr() % 64 == 0
    )


def _aligned_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous float32 copy in torch's allocator (``copy_`` transposes in cache blocks)."""
    return torch.empty(tensor.shape, dtype=torch.float32).copy_(tensor)


def save_bilm(bilm: BiLM, directory: PathLike) -> Path:
    """Write a native checkpoint: ``options.json`` + ``model.safetensors``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    bilm.options.to_file(directory / OPTIONS_NAME)
    state = {k: v.detach().cpu().contiguous() for k, v in bilm.state_dict().items()}
    save_file(state, str(directory / SAFETENSORS_NAME))
    return directory


def export_bilm_tf(bilm: BiLM, directory: PathLike) -> Path:
    """Write ``options.json`` + ``weights.hdf5`` in the released layout (readable by AllenNLP)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    bilm.options.to_file(directory / OPTIONS_NAME)
    write_bilm_tf_weights(bilm, directory / HDF5_NAME)
    return directory


def read_bilm_tf_weights(options: BiLMOptions, weight_file: PathLike) -> Dict[str, torch.Tensor]:
    """Read a bilm-tf HDF5 file into a ``BiLM`` state dict, checking every shape."""
    weight_file = Path(weight_file)
    try:
        handle = h5py.File(weight_file, "r")
    except OSError as err:
        raise WeightFileError(
            f"{weight_file}: not a readable HDF5 weight file (truncated or corrupt?): {err}"
        ) from err
    with handle:
        reader = _DatasetReader(handle, weight_file)
        state = dict(_convert_from_tf(options, reader))
        reader.check_all_used(options)
    return state


def write_bilm_tf_weights(bilm: BiLM, weight_file: PathLike) -> None:
    """Write ``bilm``'s weights to ``weight_file`` in the bilm-tf HDF5 layout."""
    if bilm.options.lexicon is not None:
        raise ValueError(
            "an ELMoForManyLangs biLM (its own character and word lexicons) has no bilm-tf "
            "layout; save it as a native checkpoint with save_bilm"
        )
    with h5py.File(weight_file, "w") as handle:
        for name, array in _convert_to_tf(bilm):
            handle.create_dataset(name, data=np.ascontiguousarray(array, dtype=np.float32))


class _DatasetReader:
    """Reads datasets by name, checks their shapes and remembers which were used."""

    def __init__(self, handle: h5py.File, path: Path) -> None:
        self.handle = handle
        self.path = path
        self.used: set = set()

    def __call__(self, name: str, shape: Tuple[int, ...], why: str) -> np.ndarray:
        try:
            dataset = self.handle[name] if name in self.handle else None
            if not isinstance(dataset, h5py.Dataset):
                raise WeightFileError(f"{self.path}: missing dataset '{name}' ({why})")
            if tuple(dataset.shape) != tuple(shape):
                raise WeightFileError(
                    f"{self.path}: dataset '{name}' has shape {tuple(dataset.shape)}, but the "
                    f"options ({why}) need {tuple(shape)}"
                )
            if dataset.dtype.kind != "f":
                raise WeightFileError(
                    f"{self.path}: dataset '{name}' holds {dataset.dtype} values, not floats ({why})"
                )
            array = dataset[()]
        except HDF5_READ_ERRORS as err:
            raise WeightFileError(
                f"{self.path}: dataset '{name}' cannot be read (truncated or corrupt file?): {err}"
            ) from err
        if not np.all(np.isfinite(array)):
            raise WeightFileError(f"{self.path}: dataset '{name}' holds NaN or infinite values")
        self.used.add(name)
        return array.astype(np.float32, copy=False)

    def check_all_used(self, options: BiLMOptions) -> None:
        names: list = []
        self.handle.visititems(
            lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None
        )
        unused = sorted(n for n in names if n not in self.used)
        known = [n for n in unused if _KNOWN_DATASET.match(n)]
        if known:
            raise WeightFileError(
                f"{self.path}: datasets {known[:6]} are not used by the options "
                f"(n_highway={options.char_cnn.n_highway}, {len(options.char_cnn.filters)} "
                f"filters, n_layers={options.lstm.n_layers}); is this the options file that "
                "belongs to these weights?"
            )
        if unused:
            warnings.warn(f"{self.path}: ignoring datasets {unused[:6]}", stacklevel=3)


#: Torch's gate blocks (i, f, g, o) are TensorFlow's blocks (i, j, f, o) in this order.
_TF_BLOCK_OF_TORCH_GATE = (0, 2, 1, 3)


def _tf_to_torch_gates(matrix: np.ndarray, hidden: int) -> np.ndarray:
    """Reorder the gate blocks of the first axis from TF (i, j, f, o) to torch (i, f, g, o)."""
    return np.concatenate([matrix[k * hidden : (k + 1) * hidden] for k in _TF_BLOCK_OF_TORCH_GATE])


def _tf_kernel_to_torch(kernel: torch.Tensor, hidden: int) -> torch.Tensor:
    """A TF LSTM kernel slice (n_inputs, 4 * hidden) -> torch's (4 * hidden, n_inputs) with the
    gate blocks reordered, in one transposing copy per block into aligned memory."""
    transposed = kernel.t()
    out = torch.empty(transposed.shape, dtype=torch.float32)
    for k, tf_block in enumerate(_TF_BLOCK_OF_TORCH_GATE):
        out[k * hidden : (k + 1) * hidden].copy_(transposed[tf_block * hidden : (tf_block + 1) * hidden])
    return out


def _torch_to_tf_gates(matrix: np.ndarray, hidden: int) -> np.ndarray:
    i, f, g, o = (matrix[k * hidden : (k + 1) * hidden] for k in range(4))
    return np.concatenate([i, g, f, o])


def _lstm_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def _convert_from_tf(
    options: BiLMOptions, read: _DatasetReader
) -> Iterator[Tuple[str, torch.Tensor]]:
    cnn, lstm = options.char_cnn, options.lstm
    e, d, p, h = cnn.embedding_dim, cnn.n_filters, lstm.projection_dim, lstm.dim
    t = torch.from_numpy

    char_embed = read("char_embed", (261, e), f"char_cnn.embedding.dim={e}")
    yield (
        "token_encoder.char_embedding.weight",
        t(np.concatenate([np.zeros((1, e), np.float32), char_embed])),
    )
    for i, (width, n) in enumerate(cnn.filters):
        why = f"char_cnn.filters[{i}]=[{width}, {n}]"
        weight = read(f"CNN/W_cnn_{i}", (1, width, e, n), why)
        yield (
            f"token_encoder.convolutions.{i}.weight",
            t(np.ascontiguousarray(weight[0].transpose(2, 1, 0))),
        )
        yield f"token_encoder.convolutions.{i}.bias", t(read(f"CNN/b_cnn_{i}", (n,), why))
    for k in range(cnn.n_highway):
        why = f"char_cnn.n_highway={cnn.n_highway}, {d} filters"
        names = [f"CNN_high_{k}/{w}" for w in ("W_transform", "W_carry", "b_transform", "b_carry")]
        w_t, w_c = (read(n, (d, d), why) for n in names[:2])
        b_t, b_c = (read(n, (d,), why) for n in names[2:])
        yield f"token_encoder.highways.{k}.linear.weight", _aligned_copy(t(np.concatenate([w_t, w_c], axis=1)).t())
        yield f"token_encoder.highways.{k}.linear.bias", t(np.concatenate([b_t, b_c]))
    why = f"{d} filters, lstm.projection_dim={p}"
    yield (
        "token_encoder.projection.weight",
        _aligned_copy(t(read("CNN_proj/W_proj", (d, p), why)).t()),
    )
    yield "token_encoder.projection.bias", t(read("CNN_proj/b_proj", (p,), why))

    for direction, name in enumerate(("forward_lstm", "backward_lstm")):
        for layer in range(lstm.n_layers):
            prefix = _lstm_prefix(direction, layer)
            why = f"lstm.dim={h}, lstm.projection_dim={p}, n_layers={lstm.n_layers}"
            kernel = t(read(f"{prefix}/W_0", (p + p, 4 * h), why))  # rows: [input; recurrent]
            bias = _tf_to_torch_gates(read(f"{prefix}/B", (4 * h,), why), h).copy()
            bias[h : 2 * h] += 1.0  # TensorFlow's implicit forget_bias
            key = f"{name}.layers.{layer}"
            yield f"{key}.weight_ih_l0", _tf_kernel_to_torch(kernel[:p], h)
            yield f"{key}.weight_hh_l0", _tf_kernel_to_torch(kernel[p:], h)
            yield f"{key}.bias_ih_l0", t(bias)
            yield f"{key}.bias_hh_l0", torch.zeros(4 * h)
            w_p = read(f"{prefix}/W_P_0", (h, p), why)
            yield f"{key}.weight_hr_l0", _aligned_copy(t(w_p).t())


def _convert_to_tf(bilm: BiLM) -> Iterator[Tuple[str, np.ndarray]]:
    state = {k: v.detach().float().cpu().numpy() for k, v in bilm.state_dict().items()}
    options = bilm.options
    yield "char_embed", state["token_encoder.char_embedding.weight"][1:]
    for i, _ in enumerate(options.char_cnn.filters):
        weight = state[f"token_encoder.convolutions.{i}.weight"]  # (n, e, w)
        yield f"CNN/W_cnn_{i}", weight.transpose(2, 1, 0)[None]
        yield f"CNN/b_cnn_{i}", state[f"token_encoder.convolutions.{i}.bias"]
    d = options.char_cnn.n_filters
    for k in range(options.char_cnn.n_highway):
        weight = state[f"token_encoder.highways.{k}.linear.weight"]
        bias = state[f"token_encoder.highways.{k}.linear.bias"]
        yield f"CNN_high_{k}/W_transform", weight[:d].T
        yield f"CNN_high_{k}/W_carry", weight[d:].T
        yield f"CNN_high_{k}/b_transform", bias[:d]
        yield f"CNN_high_{k}/b_carry", bias[d:]
    yield "CNN_proj/W_proj", state["token_encoder.projection.weight"].T
    yield "CNN_proj/b_proj", state["token_encoder.projection.bias"]
    h = options.lstm.dim
    for direction, name in enumerate(("forward_lstm", "backward_lstm")):
        for layer in range(options.lstm.n_layers):
            key = f"{name}.layers.{layer}"
            w = np.concatenate([state[f"{key}.weight_ih_l0"], state[f"{key}.weight_hh_l0"]], axis=1)
            bias = state[f"{key}.bias_ih_l0"] + state[f"{key}.bias_hh_l0"]
            bias[h : 2 * h] -= 1.0
            prefix = _lstm_prefix(direction, layer)
            yield f"{prefix}/W_0", _torch_to_tf_gates(w, h).T
            yield f"{prefix}/B", _torch_to_tf_gates(bias, h)
            yield f"{prefix}/W_P_0", state[f"{key}.weight_hr_l0"].T


def read_safetensors(path: PathLike) -> Dict[str, torch.Tensor]:
    try:
        return load_file(str(path))
    except Exception as err:  # safetensors raises its own error types
        raise WeightFileError(
            f"{path}: neither an HDF5 (bilm-tf) nor a safetensors weight file: {err}"
        ) from err
