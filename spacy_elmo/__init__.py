"""ELMo (Peters et al. 2018) for spaCy: a PyTorch biLM that reads the released weights, a pipe,
listeners for downstream components, and pretraining.

The spaCy parts (the ``elmo`` factory, the registered architectures, the CLI) are found through
entry points; importing this package does not import spaCy.
"""

from .chars import batch_to_ids
from .formats import WeightFileError, WeightSource, build_bilm
from .formats.bilm_tf import export_bilm_tf, read_bilm_tf_weights, write_bilm_tf_weights
from .formats.manylangs import is_manylangs_dir, load_manylangs_bilm
from .formats.native import save_bilm
from .nn import BiLM, BiLMRunner, ScalarMix
from .options import BiLMOptions, OptionsError
from .sources import DEFAULT_MODEL, load_bilm, load_bilm_from, resolve_weight_source

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MODEL",
    "BiLM",
    "BiLMRunner",
    "BiLMOptions",
    "OptionsError",
    "ScalarMix",
    "WeightFileError",
    "WeightSource",
    "batch_to_ids",
    "build_bilm",
    "export_bilm_tf",
    "is_manylangs_dir",
    "load_bilm",
    "load_bilm_from",
    "load_manylangs_bilm",
    "read_bilm_tf_weights",
    "resolve_weight_source",
    "save_bilm",
    "write_bilm_tf_weights",
]
