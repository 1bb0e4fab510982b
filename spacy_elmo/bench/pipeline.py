"""Which weights the pipe benchmarks run, and the ``nlp`` object around them.

The pipe and memory benchmarks measure the bundled model by default. It may not be installed
(it is trained separately), so they fall back, and say so in their output: weights given on the
command line; a named random-weight shape; the bundled model; the AllenNLP test fixture (in a
source checkout); a random model of the bundled model's shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

from .shapes import REPO_ROOT, cached_model

FIXTURE_MODEL = REPO_ROOT / "tests" / "fixtures" / "allennlp_elmo"


@dataclass
class ModelSource:
    """The pipe config keys that name the weights, and a line saying where they came from."""

    config: Dict[str, Optional[str]]
    description: str

    def to_dict(self) -> Dict[str, Any]:
        return {"description": self.description, **self.config}


def resolve_model(
    workdir: Path,
    model_path: Optional[Path] = None,
    options_file: Optional[Path] = None,
    weight_file: Optional[Path] = None,
    random_shape: Optional[str] = None,
    seed: int = 0,
) -> ModelSource:
    from ..pipe import DEFAULT_MODEL
    from ..sources import resolve_weight_source

    if model_path is not None or options_file is not None or weight_file is not None:
        # the pipe's own resolver: the same errors the pipe would give, now
        source = resolve_weight_source(model_path, options_file, weight_file, what="--model-path")
        if model_path is not None:
            return ModelSource({"model_path": str(model_path)}, source.describe())
        return ModelSource(
            {"options_file": str(options_file), "weight_file": str(weight_file)}, source.describe()
        )
    if random_shape is not None:
        directory = cached_model(workdir, random_shape, seed)
        return ModelSource({"model_path": str(directory)}, f"random weights, {random_shape} shape")
    if DEFAULT_MODEL.exists():
        return ModelSource({"model_path": str(DEFAULT_MODEL)}, f"bundled model {DEFAULT_MODEL.name}")
    if (FIXTURE_MODEL / "options.json").is_file():
        return ModelSource(
            {"model_path": str(FIXTURE_MODEL)},
            f"FALLBACK: the bundled model {DEFAULT_MODEL} is not installed; using the tiny "
            "AllenNLP test fixture (tests/fixtures/allennlp_elmo)",
        )
    directory = cached_model(workdir, "bundled", seed)
    return ModelSource(
        {"model_path": str(directory)},
        f"FALLBACK: the bundled model {DEFAULT_MODEL} is not installed; using random weights of "
        "its shape",
    )


def elmo_pipeline(
    source: ModelSource,
    sentencizer: bool = False,
    lang: str = "en",
    settings: Optional[Dict[str, Any]] = None,
):
    """A blank pipeline (+ sentencizer) + the elmo pipe, weights loaded. The pipe's ``threads``
    is null: the benches set PyTorch's thread count themselves (``--threads``)."""
    import spacy

    nlp = spacy.blank(lang)
    if sentencizer:
        nlp.add_pipe("sentencizer")
    nlp.add_pipe("elmo", config={**source.config, "threads": None, **(settings or {})}).initialize()
    return nlp
