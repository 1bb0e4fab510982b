"""Registered weight loaders: weights that enter the ``elmo`` pipe at ``initialize``.

As spacy-curated-transformers loads encoders, the weight files are named in the
``[initialize]`` block instead of the component, so the pipe's config carries no machine paths
and a saved pipeline takes its weights from its own serialized model::

    [initialize.components.elmo.weights]
    @misc = "spacy_elmo.WeightLoader.v1"
    model_path = "/models/elmo_small"

The settings are those of ``sources.resolve_weight_source``, checked when the config is
resolved; the files are looked up when ``initialize`` calls the loader.
"""

from __future__ import annotations

from typing import Callable, Optional

from spacy.util import registry

from .sources import WeightSource, check_weight_settings, resolve_weight_source


@registry.misc("spacy_elmo.WeightLoader.v1")
def weight_loader_v1(
    model_path: Optional[str] = None,
    options_file: Optional[str] = None,
    weight_file: Optional[str] = None,
    model_name: Optional[str] = None,
) -> Callable[[], WeightSource]:
    """A model directory (``model_path``), a released model's ``options_file`` and
    ``weight_file``, or a downloaded model by name (``model_name``, from the cache)."""
    check_weight_settings(model_path, options_file, weight_file, model_name=model_name)

    def load() -> WeightSource:
        return resolve_weight_source(model_path, options_file, weight_file, model_name=model_name)

    return load
