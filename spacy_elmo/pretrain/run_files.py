"""The names of the files in a pretraining output directory, in one place (docs/reference/pretraining-config.md,
"The output directory")."""

from __future__ import annotations

from ..formats.base import OPTIONS_NAME, VOCAB_NAME
from ..formats.native import SAFETENSORS_NAME

CONFIG_NAME = "config.cfg"
METRICS_NAME = "metrics.jsonl"
SOFTMAX_NAME = "softmax.safetensors"
CHECKPOINT_DIR = "checkpoint"
STATE_FILE = "state.pt"

__all__ = [
    "CHECKPOINT_DIR",
    "CONFIG_NAME",
    "METRICS_NAME",
    "OPTIONS_NAME",
    "SAFETENSORS_NAME",
    "SOFTMAX_NAME",
    "STATE_FILE",
    "VOCAB_NAME",
]
