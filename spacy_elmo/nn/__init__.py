"""Pure PyTorch modules of ELMo. Nothing here imports spaCy."""

from .bilm import BiLM, BiLMActivations, BiLMStates
from .char_cnn import CharacterEncoder, Highway
from .lstm import ClippedLSTM, DirectionalLSTM
from .scalar_mix import ScalarMix
from .token_cache import TokenEmbeddingCache

__all__ = [
    "BiLM",
    "BiLMActivations",
    "BiLMStates",
    "CharacterEncoder",
    "ClippedLSTM",
    "DirectionalLSTM",
    "Highway",
    "ScalarMix",
    "TokenEmbeddingCache",
]
