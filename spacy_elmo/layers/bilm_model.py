"""The biLM as a Thinc model: the PyTorch ``BiLM`` in a ``PyTorchWrapper`` and its converters.

``Model[List[List[str]], List[Floats3d]]``: a batch of tokenized sequences -> one array per
sequence of shape ``(n_layers + 1, n_tokens, 2 * projection_dim)`` (float32, on the model's
device: NumPy on the CPU, CuPy after ``spacy.require_gpu()``). The biLM's shape comes with its
weights, which ``set_bilm`` puts in place; ``model.to_bytes()`` carries the options and the
weights (safetensors) together, so ``from_bytes`` needs neither the files nor ``initialize``.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import srsly
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors
from thinc.api import ArgsKwargs, CupyOps, Model, PyTorchWrapper_v3, get_current_ops, torch2xp, xp2torch
from thinc.api import get_torch_default_device
from thinc.types import Floats3d

from ..nn.bilm import BiLM
from ..options import BiLMOptions
from ..weights import build_bilm

SERIALIZED_SOURCE = "serialized ELMo model"


def elmo_model() -> Model[List[List[str]], List[Floats3d]]:
    """The biLM, without weights until ``set_bilm`` (or ``from_bytes``) gives it some."""
    model = PyTorchWrapper_v3(
        None,
        convert_inputs=_tokens_to_char_ids,
        convert_outputs=_layers_to_arrays,
        device=torch_device(),
        serialize_model=bilm_to_bytes,
        deserialize_model=bilm_from_bytes,
    )
    model.name = "elmo"
    return model


def get_bilm(model: Model) -> Optional[BiLM]:
    """The BiLM inside an ``ElmoModel``, or None before its weights are set."""
    return model.shims[0]._model


def set_bilm(model: Model, bilm: BiLM) -> None:
    """Put ``bilm`` (eval mode) into an ``ElmoModel``, on the device of the current Thinc ops."""
    model.shims[0]._model = bilm.to(torch_device()).eval()
    model.set_dim("nO", bilm.output_dim, force=True)


def torch_device() -> torch.device:
    """Thinc's default torch device, with a clear error when spaCy was told to use a GPU
    (``spacy.require_gpu()``) that PyTorch cannot see."""
    if isinstance(get_current_ops(), CupyOps) and not torch.cuda.is_available():
        raise ValueError(
            "spaCy is set to run on the GPU (spacy.require_gpu / prefer_gpu), but PyTorch "
            f"{torch.__version__} sees no CUDA device (torch.cuda.is_available() is False): "
            "install a CUDA build of PyTorch, or run on the CPU"
        )
    return get_torch_default_device()


def bilm_to_bytes(bilm: Optional[BiLM]) -> bytes:
    """The options (released ``options.json`` layout) and the state dict (safetensors), msgpacked."""
    if bilm is None:
        return b""
    state = {k: v.detach().cpu().contiguous() for k, v in bilm.state_dict().items()}
    return srsly.msgpack_dumps(
        {"options": bilm.options.to_dict(), "weights": save_safetensors(state)}
    )


def bilm_from_bytes(current: Optional[BiLM], data: bytes, device: torch.device) -> Optional[BiLM]:
    """Inverse of ``bilm_to_bytes``: a new BiLM built from the stored options, on ``device``."""
    if not data:
        return None
    msg = srsly.msgpack_loads(data)
    options = BiLMOptions.from_dict(msg["options"], source=SERIALIZED_SOURCE)
    bilm = build_bilm(options, load_safetensors(msg["weights"]), source=SERIALIZED_SOURCE)
    return bilm.to(device).eval()


def _tokens_to_char_ids(
    model: Model, sequences: List[List[str]], is_train: bool
) -> Tuple[ArgsKwargs, Callable]:
    shim = model.shims[0]
    if shim._model is None:
        raise ValueError(
            "spacy_elmo.ElmoModel.v1 has no weights yet: call set_bilm(model, load_bilm(...)), "
            "load it with from_bytes, or use it through the 'elmo' pipe"
        )
    char_ids = torch.from_numpy(shim._model.batch_to_ids(sequences)).to(shim.device)
    return ArgsKwargs(args=(char_ids,), kwargs={}), lambda d_inputs: []


def _layers_to_arrays(
    model: Model, inputs_outputs: Tuple, is_train: bool
) -> Tuple[List[Floats3d], Callable]:
    """(layers (n_layers + 1, batch, max_len, width), mask) -> one (n_layers + 1, n_i, width)
    array per sequence; the backward pass pads the gradients back into the batch tensor."""
    sequences, (layers, _mask) = inputs_outputs
    lengths = [len(sequence) for sequence in sequences]
    detached = layers.detach()
    arrays = [torch2xp(detached[:, i, :n].contiguous()) for i, n in enumerate(lengths)]

    def backprop(d_arrays: List[Floats3d]) -> ArgsKwargs:
        d_layers = torch.zeros_like(detached)
        for i, (n, d_array) in enumerate(zip(lengths, d_arrays)):
            d_layers[:, i, :n] = xp2torch(d_array, device=layers.device)
        return ArgsKwargs(args=(layers,), kwargs={"grad_tensors": d_layers})

    return arrays, backprop
