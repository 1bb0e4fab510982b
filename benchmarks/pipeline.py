"""Which weights the pipe benchmarks run, and the ``nlp`` object around them.

The pipe and memory benchmarks run the weights named by ``--weights`` or ``--options-file`` +
``--weight-file`` (``spacy_elmo.cli.weights``), decided by the package's one resolver
(``spacy_elmo.sources.resolve_weight_source``): nothing named means the bundled model, which every
installation has. ``--random-shape`` runs random weights of a named shape instead. There is no
other fallback, and the benches print the files they measure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from spacy_elmo.formats import WeightSource
from spacy_elmo.layers.bilm_model import BiLMSettings
from spacy_elmo.sources import resolve_weight_source, weight_keys

from .shapes import cached_model

#: The model block's keys that name the weights (``--weights`` ... set them, not ``--set``).
WEIGHT_KEYS = ("weights", "options_file", "weight_file")


@dataclass
class ModelSource:
    """The weight keys of the ``elmo`` pipe's model block, and the files they resolve to."""

    config: Dict[str, Optional[str]]
    source: WeightSource
    random_shape: Optional[str] = None

    @property
    def description(self) -> str:
        if self.random_shape is not None:
            return f"random weights of the {self.random_shape} shape: {self.source.describe()}"
        if all(value is None for value in self.config.values()):
            return f"the bundled model: {self.source.describe()}"
        return self.source.describe()

    def to_dict(self) -> Dict[str, Any]:
        return {
            "description": self.description,
            "options_file": str(self.source.options_file),
            "weight_file": str(self.source.weight_file),
            "format": self.source.format,
            "random_shape": self.random_shape,
            "config": dict(self.config),
        }


def model_source(
    weights: Optional[str] = None,
    options_file: Optional[Path] = None,
    weight_file: Optional[Path] = None,
) -> ModelSource:
    """The weights the settings name (the bundled model for none), resolved now: ValueError or
    FileNotFoundError as the resolver gives them."""
    source = resolve_weight_source(weights, options_file, weight_file, what="--weights")
    return ModelSource(weight_keys(weights, options_file, weight_file), source)


def random_model_source(workdir: Path, shape: str, seed: int = 0) -> ModelSource:
    """Random weights of ``shape`` (``shapes.SHAPE_NAMES``), written to ``workdir`` once."""
    directory = cached_model(workdir, shape, seed)
    source = resolve_weight_source(directory, what="--random-shape")
    return ModelSource(weight_keys(directory, None, None), source, random_shape=shape)


def split_settings(settings: Optional[Dict[str, Any]]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """``--set`` settings as (model block keys, pipe keys): the biLM's settings (precision,
    max_batch_tokens, ...) live in the model block, the others (cache_size_mb, ...) on the pipe.
    The weight keys are refused: the weight options name the weights."""
    model_keys = set(BiLMSettings.model_fields)
    model: Dict[str, Any] = {}
    pipe: Dict[str, Any] = {}
    for key, value in (settings or {}).items():
        if key in WEIGHT_KEYS:
            raise ValueError(f"{key}: name the weights with --weights (or --options-file and --weight-file)")
        (model if key in model_keys else pipe)[key] = value
    return model, pipe


def elmo_pipeline(
    source: ModelSource,
    sentencizer: bool = False,
    lang: str = "en",
    settings: Optional[Dict[str, Any]] = None,
):
    """A blank pipeline (+ sentencizer) + the elmo pipe, weights loaded. The model block's
    ``threads`` is 1 (the biLM in one piece, on PyTorch's threads) unless ``settings`` set it:
    the benches set PyTorch's thread count themselves (``--threads``)."""
    import spacy

    model_settings, pipe_settings = split_settings(settings)
    nlp = spacy.blank(lang)
    if sentencizer:
        nlp.add_pipe("sentencizer")
    config = {"model": {**source.config, "threads": 1, **model_settings}, **pipe_settings}
    nlp.add_pipe("elmo", config=config).initialize()
    return nlp
