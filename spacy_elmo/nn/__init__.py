"""Pure PyTorch modules of ELMo. Nothing here imports spaCy."""

from .bilm import BiLM, BiLMActivations, BiLMStates
from .char_cnn import CharacterEncoder, Highway
from .lstm import ClippedLSTM, DirectionalLSTM
from .scalar_mix import ScalarMix
from .threads import torch_threads  # importing it registers the one-thread-after-fork handler
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
    "torch_threads",
]
