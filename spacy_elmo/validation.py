"""The one validation style of the package's settings (pydantic, as the pretraining config's
sections): strict types (no "3" for 3, no true for 1) and the few constrained ones they share, and
an error in the settings' own words (``lstm.cell_clip must be >= 0, got -1``)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Dict, List, Optional, Union

from pydantic import BaseModel, BeforeValidator, Field, Strict, ValidationError

StrictPositive = Annotated[int, Strict(), Field(ge=1)]
StrictNonNegative = Annotated[int, Strict(), Field(ge=0)]
#: A finite number (an int is one too; a bool is not).
FiniteNumber = Annotated[float, Strict(), Field(allow_inf_nan=False)]


def _threads(value: Any) -> Union[int, str]:
    if value == "auto" and isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError('must be an integer >= 1 or "auto"')
    return value


#: A thread count: an integer >= 1, or "auto" (resolved where it runs: ``nn/threads.py``).
Threads = Annotated[Union[int, str], BeforeValidator(_threads)]


#: pydantic's words for a bound -> its symbol (the longer phrases first).
_COMPARISONS = {"greater than or equal to": ">=", "less than or equal to": "<=", "greater than": ">", "less than": "<"}


def requirement(error: Dict[str, Any]) -> str:
    """What a pydantic error asks for, in the settings' words: ``must be >= 0``."""
    message = error["msg"].replace("Value error, ", "").replace("Input should be", "must be")
    for words, symbol in _COMPARISONS.items():
        message = message.replace(words, symbol)
    return re.sub(r" or instance of \w+", "", message)


def describe(error: Dict[str, Any]) -> str:
    """One pydantic error: ``where must be ..., got value`` (``where``: ``a.b[1]``)."""
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".")
    if error["type"] == "missing":
        return f"{where} is missing"
    return f"{where} {requirement(error)}, got {error['input']!r}" if where else requirement(error)


def validated(schema: type, data: Any, prefix: str, error: type = ValueError) -> Optional[BaseModel]:
    """``schema.model_validate(data)``; its errors joined into one ``error`` after ``prefix``."""
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        raise error(prefix + "; ".join(describe(e) for e in _first_causes(err.errors()))) from None


def _first_causes(errors: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The errors less a sequence's "too short" that only follows from a bad item of its own
    (pydantic counts the items left after validation)."""
    def follows(error: Dict[str, Any]) -> bool:
        loc = error["loc"]
        return error["type"] == "too_short" and any(
            other is not error and other["loc"][: len(loc)] == loc for other in errors
        )

    return [error for error in errors if not follows(error)]
