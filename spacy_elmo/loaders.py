"""Registered weight loaders: weights named in the ``[initialize]`` block enter the ``elmo`` pipe at
``initialize``, as spacy-curated-transformers loads encoders, so the pipeline's config carries no
machine paths (docs/reference/config.md). Settings are ``sources.resolve_weight_source``'s.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Optional

from spacy.util import registry

from .sources import WeightSource, check_weight_settings, resolve_weight_source


@registry.misc("spacy_elmo.WeightLoader.v2")
def weight_loader_v2(
    weights: Optional[str] = None,
    options_file: Optional[str] = None,
    weight_file: Optional[str] = None,
) -> Callable[[], WeightSource]:
    """``weights`` (a directory or a model's name), or ``options_file`` + ``weight_file``."""
    check_weight_settings(weights, options_file, weight_file, what="weights")
    return partial(resolve_weight_source, weights, options_file, weight_file, what="weights")  # picklable
