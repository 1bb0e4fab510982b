"""The one validation style of the package's settings: pydantic, reading annotated types where the
settings are declared (a registered function's signature, ``checked_arguments``; a config section's
fields, ``validated``), one family of strict types (no "3" for 3, no true for 1), and one wording
for a bad value: ``where must be ..., got value`` (``lstm.cell_clip must be >= 0, got -1``)."""

from __future__ import annotations

import functools
import inspect
import re
from typing import Annotated, Any, Callable, Dict, List, Optional, TypeVar, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, ValidationError, validate_call

F = TypeVar("F", bound=Callable[..., Any])

StrictPositive = Annotated[int, Strict(), Field(ge=1)]
StrictNonNegative = Annotated[int, Strict(), Field(ge=0)]
#: A finite number (an int is one too; a bool is not).
FiniteNumber = Annotated[float, Strict(), Field(allow_inf_nan=False)]
PositiveNumber = Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)]
NonNegativeNumber = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]
#: A share: 0 <= x < 1 (a dropout rate, Adam's betas).
Fraction = Annotated[float, Strict(), Field(ge=0, lt=1)]


def at_least(minimum: int) -> Any:
    """A strict integer >= ``minimum``."""
    return Annotated[int, Strict(), Field(ge=minimum)]


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
    message = re.sub(r"^(Value error, )?\w+ should", "must", error["msg"]).replace("Value error, ", "")
    message = re.sub(r" after validation, not \d+", "", message)
    for words, symbol in _COMPARISONS.items():
        message = message.replace(words, symbol)
    return re.sub(r" or instance of \w+", "", message)


def describe(error: Dict[str, Any], schema: Optional[type] = None) -> str:
    """One pydantic error: ``where must be ..., got value`` (``where``: ``a.b[1]``); an unknown key
    of ``schema`` names the keys it has."""
    loc = error["loc"]
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
    if error["type"] == "missing":
        return f"{where} is missing"
    if error["type"] == "extra_forbidden":
        return f"{where} is not a known key (known: {', '.join(_fields_at(schema, loc[:-1]))})"
    return f"{where} {requirement(error)}, got {error['input']!r}" if where else requirement(error)


def _fields_at(schema: Optional[type], loc: tuple) -> List[str]:
    """The field names of the model ``loc`` leads to inside ``schema``."""
    for part in loc:
        field = getattr(schema, "model_fields", {}).get(part)
        schema = None if field is None else field.annotation
    return list(getattr(schema, "model_fields", {}))


def problems(err: ValidationError, schema: Optional[type] = None) -> str:
    """Every error of ``err`` in the one wording, joined."""
    return "; ".join(describe(e, schema) for e in _first_causes(err.errors()))


def validated(schema: type, data: Any, prefix: str, error: type = ValueError) -> BaseModel:
    """``schema.model_validate(data)``; its errors joined into one ``error`` after ``prefix``."""
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        raise error(prefix + problems(err, schema)) from None


def checked_arguments(name: str) -> Callable[[F], F]:
    """Validate a registered function's arguments against its annotated signature (pydantic's
    ``validate_call``, which also checks the bounds that the config registry does not): a bad
    value raises ``ValueError("NAME: key must be ..., got value")`` before the function runs."""

    def decorate(func: F) -> F:
        @functools.cache
        def validating() -> Callable[..., Any]:  # built at the first call: the signature may name later classes
            return validate_call(func, config=ConfigDict(arbitrary_types_allowed=True))

        @functools.wraps(func)
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                return validating()(*args, **kwargs)
            except ValidationError as err:
                raise ValueError(f"{name}: {problems(err)}") from None

        checked.__signature__ = inspect.signature(func)  # type: ignore[attr-defined]  # for spaCy's getfullargspec
        return checked  # type: ignore[return-value]

    return decorate


def _first_causes(errors: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The errors less a sequence's "too short" that only follows from a bad item of its own
    (pydantic counts the items left after validation)."""
    def follows(error: Dict[str, Any]) -> bool:
        loc = error["loc"]
        return error["type"] == "too_short" and any(
            other is not error and other["loc"][: len(loc)] == loc for other in errors
        )

    return [error for error in errors if not follows(error)]
