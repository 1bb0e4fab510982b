"""What every weight format shares: the files it found (``WeightSource``), what its reader returns
(``LoadedWeights``), the reader interface (``WeightFormat``) and the one way a state dict becomes a
``BiLM`` (``build_bilm``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Mapping, Optional, Tuple, Union

import torch

from ..indexers import ByteIndexer, TokenIndexer
from ..nn.bilm import BiLM
from ..options import BiLMOptions

PathLike = Union[str, Path]
#: The biLM's shape, in the released layout (bilm-tf and native checkpoints alike).
OPTIONS_NAME = "options.json"
#: The vocabulary beside a pretrained model: one word per line, most frequent first.
VOCAB_NAME = "vocab.txt"


class WeightFileError(ValueError):
    """A weight file that is unreadable or does not match its options."""


class OptionsMismatchError(WeightFileError):
    """A readable weight file whose parameters are not those its options describe: the options
    file of another model (or a whole weight file beside a wrong options.json)."""


@dataclass(frozen=True)
class WeightSource:
    """Resolved, existing files of one biLM. ``format``: the ``name`` of the ``WeightFormat`` that
    reads them; ``directory``: the model directory (``vocab.txt``, a pretraining run's softmax)."""

    options_file: Path
    weight_file: Path
    format: str

    @property
    def directory(self) -> Path:
        return self.weight_file.parent

    def describe(self) -> str:
        return f"{self.weight_file} ({self.format})"


@dataclass
class LoadedWeights:
    """A reader's result: the biLM's shape, its state dict (our names) and its indexer."""

    options: BiLMOptions
    state: Dict[str, torch.Tensor]
    indexer: TokenIndexer


@dataclass(frozen=True)
class WeightFormat:
    """One weight format, as ``spacy_elmo.formats.FORMATS`` registers it.

    locate(directory): the files of a model directory in this format, None if it is not one (one
        that is but is broken raises, naming what is wrong);
    accepts(weight_file): whether a weight file named on its own is this format's;
    read(source): the files' options, state dict and indexer, checked against each other;
    check(source): ``read``'s cheap checks, run when weights are resolved: a whole header and every
        parameter's shape, reading no weights (WeightFileError or OptionsError, naming the file)."""

    name: str
    locate: Callable[[Path], Optional[WeightSource]]
    accepts: Callable[[Path], bool]
    read: Callable[[WeightSource], LoadedWeights]
    check: Callable[[WeightSource], None]


def parameter_shapes(options: BiLMOptions, indexer: Optional[TokenIndexer] = None) -> Dict[str, Tuple[int, ...]]:
    """Every parameter's shape for ``options``, from a model on the meta device (no memory)."""
    indexer = ByteIndexer() if indexer is None else indexer
    with torch.device("meta"):
        bilm = BiLM(options, indexer=indexer)
    return {name: tuple(tensor.shape) for name, tensor in bilm.state_dict().items()}


def check_parameter_shapes(
    expected: Mapping[str, Tuple[int, ...]], found: Mapping[str, Tuple[int, ...]], source: str
) -> None:
    """The parameters ``found`` in ``source`` are those the options need, with their shapes."""
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    if missing or unexpected:
        raise OptionsMismatchError(
            f"{source}: parameters do not match the options: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )
    for name, shape in expected.items():
        if tuple(found[name]) != tuple(shape):
            raise OptionsMismatchError(
                f"{source}: parameter '{name}' has shape {tuple(found[name])}, the options need {tuple(shape)}"
            )


def build_bilm(
    options: BiLMOptions,
    state: Dict[str, torch.Tensor],
    source: str = "state dict",
    stateful: bool = False,
    indexer: Optional[TokenIndexer] = None,
) -> BiLM:
    """A BiLM holding ``state`` without first filling random weights (fast for large models).
    ``indexer`` (default: the released byte ids) is checked against the options first."""
    indexer = ByteIndexer() if indexer is None else indexer
    indexer.check_options(options, source)
    with torch.device("meta"):
        bilm = BiLM(options, stateful=stateful, indexer=indexer)
    expected = {name: tuple(tensor.shape) for name, tensor in bilm.state_dict().items()}
    check_parameter_shapes(expected, {name: tuple(tensor.shape) for name, tensor in state.items()}, source)
    # Hold the weights in torch's own (64-byte aligned) memory: BLAS kernels round differently on
    # differently aligned buffers, and a model must give the same numbers however it was loaded.
    aligned = {k: v if _is_aligned(v) else aligned_copy(v) for k, v in state.items()}
    bilm.load_state_dict(aligned, assign=True)
    return bilm


def loaded_bilm(
    loaded: LoadedWeights, source: str, stateful: bool = False, device: Union[str, torch.device, None] = None
) -> BiLM:
    """``build_bilm`` of a reader's result, in eval mode, on ``device`` if given."""
    bilm = build_bilm(loaded.options, loaded.state, source, stateful, loaded.indexer)
    return bilm.eval() if device is None else bilm.to(device).eval()


def _is_aligned(tensor: torch.Tensor) -> bool:
    return (
        tensor.dtype == torch.float32
        and tensor.device.type == "cpu"
        and tensor.is_contiguous()
        and tensor.data_ptr() % 64 == 0
    )


def aligned_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous float32 copy in torch's allocator (``copy_`` transposes in cache blocks)."""
    return torch.empty(tensor.shape, dtype=torch.float32).copy_(tensor)
