"""biLM pretraining: streamed corpora, vocabulary, the LM objective, the (distributed) trainer."""

from .config import DEFAULT_CONFIG, ConfigError, load_config, parse_settings
from .corpus import CorpusError
from .trainer import Trainer, TrainingInterrupted, pretrain
from .vocab import Vocab, VocabError

__all__ = [
    "DEFAULT_CONFIG",
    "ConfigError",
    "CorpusError",
    "Trainer",
    "TrainingInterrupted",
    "Vocab",
    "VocabError",
    "load_config",
    "parse_settings",
    "pretrain",
]
