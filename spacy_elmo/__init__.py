"""ELMo (Peters et al. 2018) for spaCy: a PyTorch biLM that reads the released weights, a pipe,
listeners for downstream components, and pretraining.

The spaCy parts (the ``elmo`` factory, the registered architectures, the CLI) are found through
entry points. The names below are imported from their modules on first use (PEP 562), so that
``import spacy_elmo`` (and ``python -m spacy_elmo --help``) imports neither PyTorch nor spaCy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, List

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_EXPORTS: Dict[str, str] = {
    "batch_to_ids": "chars",
    "WeightFileError": "formats",
    "WeightSource": "formats",
    "build_bilm": "formats",
    "export_bilm_tf": "formats.bilm_tf",
    "read_bilm_tf_weights": "formats.bilm_tf",
    "write_bilm_tf_weights": "formats.bilm_tf",
    "is_manylangs_dir": "formats.manylangs",
    "save_bilm": "formats.native",
    "BiLM": "nn",
    "BiLMRunner": "nn",
    "ScalarMix": "nn",
    "BiLMOptions": "options",
    "OptionsError": "options",
    "DEFAULT_MODEL": "sources",
    "load_bilm": "sources",
    "load_bilm_from": "sources",
    "resolve_weight_source": "sources",
    "restore": "pipe",
}

__all__: List[str] = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'spacy_elmo' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> List[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # what type checkers and IDEs read
    from .chars import batch_to_ids  # noqa: F401
    from .formats import WeightFileError, WeightSource, build_bilm  # noqa: F401
    from .formats.bilm_tf import export_bilm_tf, read_bilm_tf_weights, write_bilm_tf_weights  # noqa: F401
    from .formats.manylangs import is_manylangs_dir  # noqa: F401
    from .formats.native import save_bilm  # noqa: F401
    from .nn import BiLM, BiLMRunner, ScalarMix  # noqa: F401
    from .options import BiLMOptions, OptionsError  # noqa: F401
    from .pipe import restore  # noqa: F401
    from .sources import DEFAULT_MODEL, load_bilm, load_bilm_from, resolve_weight_source  # noqa: F401
