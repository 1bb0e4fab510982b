"""The base of the pretraining config's typed sections (pydantic), and their error wording."""

from __future__ import annotations

from typing import Any, Dict

from pydantic import BaseModel, ConfigDict

from ..validation import requirement


class Section(BaseModel):
    """A config section: exact types (no "3" for 3, no true for 1) and no unknown keys, so a
    typo in a key or an override is an error rather than a silently ignored value."""

    model_config = ConfigDict(strict=True, extra="forbid")


def describe_error(error: Dict[str, Any], schema: type) -> str:
    """One pydantic error of ``schema`` (sections as fields) in the config's words:
    ``[training] batch_tokens: must be > 0, got 0``."""
    if not error["loc"]:  # the config as a whole
        return f"config: {error['msg']}"
    section, *rest = error["loc"]
    key = ".".join(map(str, rest))
    where = f"[{section}] {key}" if key else f"[{section}]"
    kind = error["type"]
    if kind == "missing":
        return f"{where}: missing"
    if kind == "extra_forbidden":
        field = schema.model_fields.get(section)
        if key and field is not None:
            known = ", ".join(field.annotation.model_fields)
            return f"{where}: not a key of [{section}] (its keys: {known})"
        return f"{where}: not a section of the config"
    return f"{where}: {requirement(error)}, got {error['input']!r}"
