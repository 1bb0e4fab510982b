"""The released ELMo weight format: ``options.json`` + bilm-tf's HDF5 layout, read and written.

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

TensorFlow's gate order is (i, j, f, o) with ``forget_bias=1.0`` added at run time; torch's is (i,
f, g, o); ``dir`` 0 is the forward LM. A directory holds ``options.json`` and ``weights.hdf5`` or
one other bilm-tf ``*.hdf5`` (HDF5 files without its datasets are not weight files).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

import h5py
import numpy as np
import torch

from ..files import replacing
from ..indexers import ByteIndexer
from ..nn.bilm import BiLM
from ..options import BiLMOptions
from .base import (
    OPTIONS_NAME,
    LoadedWeights,
    OptionsMismatchError,
    PathLike,
    WeightFileError,
    WeightFormat,
    WeightSource,
    aligned_copy,
)

NAME = "bilm-tf"
HDF5_NAME = "weights.hdf5"

_KNOWN_DATASET = re.compile(
    r"^(char_embed|CNN/[Wb]_cnn_\d+|CNN_high_\d+/.*|CNN_proj/.*|RNN_\d/.*)$"
)


#: What h5py raises on a damaged file, from lookups and reads alike: OSError (truncated data),
#: RuntimeError (a damaged symbol table), KeyError (a broken external link).
HDF5_READ_ERRORS = (OSError, RuntimeError, KeyError)


def export_bilm_tf(bilm: BiLM, directory: PathLike) -> Path:
    """Write ``options.json`` + ``weights.hdf5`` in the released layout (readable by AllenNLP)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    bilm.options.to_file(directory / OPTIONS_NAME)
    write_bilm_tf_weights(bilm, directory / HDF5_NAME)
    return directory


def read_bilm_tf_weights(options: BiLMOptions, weight_file: PathLike) -> Dict[str, torch.Tensor]:
    """Read a bilm-tf HDF5 file into a ``BiLM`` state dict, checking every shape."""
    with _open(Path(weight_file)) as handle:
        read = _DatasetReader(handle, Path(weight_file), options)
        parts: Dict[str, List[torch.Tensor]] = {}
        for dataset in read.expected.values():
            for key, tensor in _from_tf(dataset, read(dataset.name)):
                parts.setdefault(key, []).append(tensor)
        read.check_all_used()
    return {key: torch.cat(rows) if len(rows) > 1 else rows[0] for key, rows in parts.items()}


def _open(weight_file: Path) -> h5py.File:
    try:
        return h5py.File(weight_file, "r")
    except OSError as err:
        raise WeightFileError(
            f"{weight_file}: not a readable HDF5 weight file (truncated or corrupt?): {err}; "
            f"{_size_against_superblock(weight_file, err)}"
        ) from err


def _size_against_superblock(path: Path, err: OSError) -> str:
    """The file's size, and the size HDF5's superblock records when the error gives it (a cut
    file: HDF5 says "truncated file: eof = ..., stored_eof = ...")."""
    size = path.stat().st_size
    recorded = re.search(r"stored_eof = (\d+)", str(err))
    if recorded is None:
        return f"it holds {size:,} bytes"
    return f"it holds {size:,} bytes, its superblock records {int(recorded.group(1)):,}"


def write_bilm_tf_weights(bilm: BiLM, weight_file: PathLike) -> None:
    """Write ``bilm``'s weights to ``weight_file`` in the bilm-tf HDF5 layout."""
    if not isinstance(bilm.indexer, ByteIndexer):
        raise ValueError(
            "an ELMoForManyLangs biLM (its own character and word lexicons) has no bilm-tf "
            "layout; save it as a native checkpoint with save_bilm"
        )
    with replacing(weight_file) as temporary, h5py.File(temporary, "w") as handle:
        state = {k: v.detach().float().cpu().numpy() for k, v in bilm.state_dict().items()}
        for dataset in bilm_tf_layout(bilm.options):
            array = np.ascontiguousarray(_to_tf(dataset, state), dtype=np.float32)
            handle.create_dataset(dataset.name, data=array)


class _DatasetReader:
    """Reads the datasets of ``options``' layout by name, checks their shapes and remembers which
    were used."""

    def __init__(self, handle: h5py.File, path: Path, options: BiLMOptions) -> None:
        self.handle = handle
        self.path = path
        self.options = options
        self.expected = {dataset.name: dataset for dataset in bilm_tf_layout(options)}
        self.used: set = set()

    def dataset(self, name: str) -> h5py.Dataset:
        """The dataset ``name``, checked (present, of its expected shape, float), not read."""
        shape, why = self.expected[name].shape, self.expected[name].why
        try:
            dataset = self.handle[name] if name in self.handle else None
            if not isinstance(dataset, h5py.Dataset):
                raise OptionsMismatchError(f"{self.path}: missing dataset '{name}' ({why})")
            if tuple(dataset.shape) != tuple(shape):
                raise OptionsMismatchError(
                    f"{self.path}: dataset '{name}' has shape {tuple(dataset.shape)}, but the "
                    f"options ({why}) need {tuple(shape)}"
                )
            if dataset.dtype.kind != "f":
                raise WeightFileError(
                    f"{self.path}: dataset '{name}' holds {dataset.dtype} values, not floats ({why})"
                )
        except HDF5_READ_ERRORS as err:
            raise self._unreadable(name, err) from err
        self.used.add(name)
        return dataset

    def _unreadable(self, name: str, err: Exception) -> WeightFileError:
        return WeightFileError(f"{self.path}: dataset '{name}' cannot be read (truncated or corrupt file?): {err}")

    def __call__(self, name: str) -> np.ndarray:
        dataset = self.dataset(name)
        try:
            array = dataset[()]
        except HDF5_READ_ERRORS as err:
            raise self._unreadable(name, err) from err
        if not np.all(np.isfinite(array)):
            raise WeightFileError(f"{self.path}: dataset '{name}' holds NaN or infinite values")
        return array.astype(np.float32, copy=False)

    def check_all_used(self) -> None:
        cnn, lstm = self.options.char_cnn, self.options.lstm
        names: list = []
        self.handle.visititems(
            lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None
        )
        unused = sorted(n for n in names if n not in self.used)
        known = [n for n in unused if _KNOWN_DATASET.match(n)]
        if known:
            raise OptionsMismatchError(
                f"{self.path}: datasets {known[:6]} are not used by the options "
                f"(n_highway={cnn.n_highway}, {len(cnn.filters)} filters, "
                f"n_layers={lstm.n_layers}); is this the options file that "
                "belongs to these weights?"
            )
        if unused:
            warnings.warn(f"{self.path}: ignoring datasets {unused[:6]}", stacklevel=3)


#: Torch's gate blocks (i, f, g, o) are TensorFlow's blocks (i, j, f, o) in this order, and the
#: other way round: the reordering swaps the middle two blocks, so it is its own inverse.
_TF_BLOCK_OF_TORCH_GATE = (0, 2, 1, 3)


def _swap_gates(matrix: np.ndarray, hidden: int) -> np.ndarray:
    """Reorder the gate blocks of the first axis from TF (i, j, f, o) to torch (i, f, g, o), or back."""
    return np.concatenate([matrix[k * hidden : (k + 1) * hidden] for k in _TF_BLOCK_OF_TORCH_GATE])


def _tf_kernel_to_torch(kernel: torch.Tensor, hidden: int) -> torch.Tensor:
    """A TF LSTM kernel slice (n_inputs, 4 * hidden) -> torch's (4 * hidden, n_inputs) with the
    gate blocks reordered, in one transposing copy per block into aligned memory."""
    transposed = kernel.t()
    out = torch.empty(transposed.shape, dtype=torch.float32)
    for k, tf_block in enumerate(_TF_BLOCK_OF_TORCH_GATE):
        out[k * hidden : (k + 1) * hidden].copy_(transposed[tf_block * hidden : (tf_block + 1) * hidden])
    return out


class TfDataset(NamedTuple):
    """One bilm-tf dataset: its name and TF shape, the ``BiLM`` state-dict key it fills (``*``:
    an LSTM kernel or bias fills both the ``ih`` and the ``hh`` key), how its values convert
    (``kind``), the options that give its shape (``why``) and the rows of the key it fills."""

    name: str
    shape: Tuple[int, ...]
    key: str
    kind: str
    why: str
    rows: slice = slice(None)


def bilm_tf_layout(options: BiLMOptions) -> Iterator[TfDataset]:
    """Each bilm-tf dataset for ``options``, in the order of the table above."""
    cnn, lstm = options.char_cnn, options.lstm
    e, d, p, h = cnn.embedding_dim, cnn.n_filters, lstm.projection_dim, lstm.dim
    yield TfDataset("char_embed", (261, e), "token_encoder.char_embedding.weight", "char_embed", f"char_cnn.embedding.dim={e}")
    for i, (width, n) in enumerate(cnn.filters):
        why, key = f"char_cnn.filters[{i}]=[{width}, {n}]", f"token_encoder.convolutions.{i}"
        yield TfDataset(f"CNN/W_cnn_{i}", (1, width, e, n), f"{key}.weight", "conv", why)
        yield TfDataset(f"CNN/b_cnn_{i}", (n,), f"{key}.bias", "copy", why)
    why = f"char_cnn.n_highway={cnn.n_highway}, {d} filters"
    transform, carry = slice(0, d), slice(d, 2 * d)  # torch's Linear holds [transform; carry]
    for k in range(cnn.n_highway):
        key = f"token_encoder.highways.{k}.linear"
        yield TfDataset(f"CNN_high_{k}/W_transform", (d, d), f"{key}.weight", "dense", why, transform)
        yield TfDataset(f"CNN_high_{k}/W_carry", (d, d), f"{key}.weight", "dense", why, carry)
        yield TfDataset(f"CNN_high_{k}/b_transform", (d,), f"{key}.bias", "copy", why, transform)
        yield TfDataset(f"CNN_high_{k}/b_carry", (d,), f"{key}.bias", "copy", why, carry)
    why = f"{d} filters, lstm.projection_dim={p}"
    yield TfDataset("CNN_proj/W_proj", (d, p), "token_encoder.projection.weight", "dense", why)
    yield TfDataset("CNN_proj/b_proj", (p,), "token_encoder.projection.bias", "copy", why)
    why = f"lstm.dim={h}, lstm.projection_dim={p}, n_layers={lstm.n_layers}"
    for direction, name in enumerate(("forward_lstm", "backward_lstm")):
        for layer in range(lstm.n_layers):
            tf, key = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell", f"{name}.layers.{layer}"
            yield TfDataset(f"{tf}/W_0", (p + p, 4 * h), f"{key}.weight_*_l0", "lstm_kernel", why)
            yield TfDataset(f"{tf}/B", (4 * h,), f"{key}.bias_*_l0", "lstm_bias", why)
            yield TfDataset(f"{tf}/W_P_0", (h, p), f"{key}.weight_hr_l0", "dense", why)


def _from_tf(dataset: TfDataset, array: np.ndarray) -> Iterator[Tuple[str, torch.Tensor]]:
    """The state-dict tensors (or their rows) one dataset fills."""
    t, ih, hh = torch.from_numpy, dataset.key.replace("*", "ih"), dataset.key.replace("*", "hh")
    if dataset.kind == "char_embed":  # a zero row for the all-padding token's id 0
        yield dataset.key, t(np.concatenate([np.zeros((1, array.shape[1]), np.float32), array]))
    elif dataset.kind == "conv":
        yield dataset.key, t(np.ascontiguousarray(array[0].transpose(2, 1, 0)))
    elif dataset.kind == "dense":
        yield dataset.key, aligned_copy(t(array).t())
    elif dataset.kind == "lstm_kernel":  # rows: [input; recurrent], both projection_dim wide
        kernel, inputs, h = t(array), len(array) // 2, array.shape[1] // 4
        yield ih, _tf_kernel_to_torch(kernel[:inputs], h)
        yield hh, _tf_kernel_to_torch(kernel[inputs:], h)
    elif dataset.kind == "lstm_bias":
        h = len(array) // 4
        bias = _swap_gates(array, h).copy()
        bias[h : 2 * h] += 1.0  # TensorFlow's implicit forget_bias
        yield ih, t(bias)
        yield hh, torch.zeros(4 * h)
    else:
        yield dataset.key, t(array)


def _to_tf(dataset: TfDataset, state: Dict[str, np.ndarray]) -> np.ndarray:
    """The values of one dataset, from ``BiLM``'s state dict (the inverse of ``_from_tf``)."""
    if dataset.kind in ("lstm_kernel", "lstm_bias"):
        ih, hh = state[dataset.key.replace("*", "ih")], state[dataset.key.replace("*", "hh")]
        h = len(ih) // 4
        if dataset.kind == "lstm_kernel":
            return _swap_gates(np.concatenate([ih, hh], axis=1), h).T
        bias = ih + hh
        bias[h : 2 * h] -= 1.0
        return _swap_gates(bias, h)
    value = state[dataset.key][dataset.rows]
    if dataset.kind == "char_embed":
        return value[1:]
    if dataset.kind == "conv":  # (n, e, w)
        return value.transpose(2, 1, 0)[None]
    return value.T if dataset.kind == "dense" else value


def _locate(directory: Path) -> Optional[WeightSource]:
    """``weights.hdf5``, else the one bilm-tf ``*.hdf5`` of the directory; None without either."""
    if (directory / HDF5_NAME).is_file():
        return WeightSource(directory / OPTIONS_NAME, directory / HDF5_NAME, NAME)
    found = [p for p in sorted(directory.glob("*.hdf5")) if _is_bilm_tf_weight_file(p)]
    if not found:
        return None
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise ValueError(
            f"{directory}: several bilm-tf weight files ({names}); name one with options_file "
            "and weight_file"
        )
    return WeightSource(directory / OPTIONS_NAME, found[0], NAME)


def _is_bilm_tf_weight_file(path: Path) -> bool:
    """An HDF5 file with bilm-tf's datasets (not, say, cached token embeddings beside it)."""
    if not h5py.is_hdf5(str(path)):
        return False
    try:
        with h5py.File(path, "r") as handle:
            return "char_embed" in handle and "RNN_0" in handle
    except HDF5_READ_ERRORS as err:
        raise WeightFileError(f"{path}: not a readable HDF5 file (truncated or corrupt?): {err}") from err


def _accepts(weight_file: Path) -> bool:
    return h5py.is_hdf5(str(weight_file))


def _options(source: WeightSource) -> BiLMOptions:
    options = BiLMOptions.from_file(source.options_file)
    ByteIndexer().check_options(options, str(source.options_file))
    return options


def _read(source: WeightSource) -> LoadedWeights:
    options = _options(source)
    return LoadedWeights(options, read_bilm_tf_weights(options, source.weight_file), ByteIndexer())


def _check(source: WeightSource) -> None:
    """HDF5's superblock (opening a cut file fails: it records the file's end) and every
    dataset's shape and type against the options, from the file's metadata; no data is read."""
    options = _options(source)
    with _open(source.weight_file) as handle:
        reader = _DatasetReader(handle, source.weight_file, options)
        for name in reader.expected:
            reader.dataset(name)
        with warnings.catch_warnings():  # datasets of no known kind: said once, when read
            warnings.simplefilter("ignore")
            reader.check_all_used()


FORMAT = WeightFormat(NAME, _locate, _accepts, _read, _check)
