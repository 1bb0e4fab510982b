"""Command help as the terminal should wrap it.

Docstrings are hard-wrapped at 100 columns. Typer's rich help keeps every single line break, and
rich wraps each line again at the terminal's width, so an 80-column terminal showed sentences cut
in two ("... a" / "JSON object ..."). Here each paragraph becomes one line before typer sees it,
and rich wraps it once. List items ("- ..."), indented lines and paragraphs marked with click's
"\\b" (keep as is) keep their own lines.
"""

from __future__ import annotations

import inspect
from typing import List

import typer


def reflow(text: str) -> str:
    """Join the lines of each paragraph of ``text`` (a docstring), keeping list items, indented
    lines and ``\\b`` paragraphs on lines of their own."""
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


def reflow_commands(app: typer.Typer) -> typer.Typer:
    """Reflow the help of every command of ``app`` and of its sub-apps (before it runs)."""
    for command in app.registered_commands:
        text = command.help or inspect.getdoc(command.callback)
        if text:
            command.help = reflow(text)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            reflow_commands(group.typer_instance)
    return app
