"""Pure PyTorch modules of ELMo. Nothing here imports spaCy."""

from . import threads  # noqa: F401  importing it registers the one-thread-after-fork handler
from .bilm import BiLM, BiLMStates
from .char_cnn import CharacterEncoder, Highway
from .lstm import ClippedLSTM, DirectionalLSTM
from .runner import BiLMRunner
from .scalar_mix import ScalarMix
from .token_cache import TokenEmbeddingCache

__all__ = [
    "BiLM",
    "BiLMRunner",
    "BiLMStates",
    "CharacterEncoder",
    "ClippedLSTM",
    "DirectionalLSTM",
    "Highway",
    "ScalarMix",
    "TokenEmbeddingCache",
]
