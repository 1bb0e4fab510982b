"""Command help as the terminal should wrap it.

Docstrings are hard-wrapped, and typer's rich help keeps every line break, which rich then wraps
again: sentences cut in two on a narrow terminal. Each paragraph becomes one line here (list items,
indented lines and ``\\b`` paragraphs keep theirs). Flags get an empty metavar, since typer's rich
help prints a type even for a switch (``--force <bool>``).
"""

from __future__ import annotations

import inspect
from typing import Any, List

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import DefaultPlaceholder


def reflow(text: str) -> str:
    """Join each paragraph's lines; list items, indented lines, ``\\b`` paragraphs kept."""
    paragraphs = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        if paragraph.startswith("\b"):
            paragraphs.append(paragraph)
            continue
        lines: List[str] = []
        for line in paragraph.splitlines():
            starts_a_line = not lines or line.startswith((" ", "-", "*")) or line[:1].isdigit() and ". " in line[:4]
            if starts_a_line:
                lines.append(line)
            else:
                lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


class _FlagsTakeNoValue:
    """Mixin of a command or group whose help shows no value placeholder after a flag."""

    def get_params(self, ctx: Any) -> list:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""  # printed instead of the type: "--force", not "--force <bool>"
        return params


class HelpCommand(_FlagsTakeNoValue, TyperCommand):
    """A command whose switches show no value placeholder in --help."""


class HelpGroup(_FlagsTakeNoValue, TyperGroup):
    """A group (the app, a sub-app) whose switches show no value placeholder in --help."""


def _flags_take_no_value(cls: Any, default: type) -> type:
    """``cls`` (typer's command or group class, or a command's own) with the mixin."""
    if cls is None or isinstance(cls, DefaultPlaceholder) or cls in (TyperCommand, TyperGroup):
        return default
    if issubclass(cls, _FlagsTakeNoValue):
        return cls
    return type(cls.__name__, (_FlagsTakeNoValue, cls), {"__module__": cls.__module__})


def prepare_help(app: typer.Typer) -> typer.Typer:
    """Reflow the help of every command of ``app`` and of its sub-apps, and make their flags show
    no value placeholder (call it once the commands are registered, before the app runs)."""
    app.info.cls = _flags_take_no_value(app.info.cls, HelpGroup)
    for command in app.registered_commands:
        text = command.help or inspect.getdoc(command.callback)
        if text:
            command.help = reflow(text)
        command.cls = _flags_take_no_value(command.cls, HelpCommand)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            if not isinstance(group.cls, DefaultPlaceholder):  # a class given to add_typer
                group.cls = _flags_take_no_value(group.cls, HelpGroup)
            prepare_help(group.typer_instance)
    return app
