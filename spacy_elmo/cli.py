"""``python -m spacy_elmo``: the command-line interface (typer).

Each command lives beside the code it drives and is registered here, so this file stays an index.
"""

from __future__ import annotations

import typer

from . import commands

app = typer.Typer(
    name="spacy_elmo",
    help="ELMo for spaCy: embed text, convert weight files, pretrain biLMs, benchmark.",
    no_args_is_help=True,
    add_completion=False,
)

app.command("convert")(commands.convert)
app.command("embed")(commands.embed)
app.command("demo")(commands.demo)


def main() -> None:
    app()
