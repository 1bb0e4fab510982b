"""The base of the pretraining config's typed sections (pydantic), checked and worded as every
setting of the package is (``spacy_elmo.validation``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A config section: exact types (no "3" for 3, no true for 1) and no unknown keys, so a
    typo in a key or an override is an error rather than a silently ignored value."""

    model_config = ConfigDict(strict=True, extra="forbid")
