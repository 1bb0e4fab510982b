"""``python -m spacy_elmo``: the command-line interface (typer).

Each command lives beside the code it drives and is registered here, so this file stays an index.
"""

from __future__ import annotations

import typer

from . import commands
from .bench.command import bench_command
from .cli_help import prepare_help
from .compare import compare_command
from .embedding import embed
from .hub.commands import download_cli, list_cli
from .inspection import inspect_command
from .pretrain.commands import (
    EXTRA_ARGS,
    evaluate_lm_command,
    init_config_command,
    plot_curve_command,
    pretrain_command,
)

app = typer.Typer(
    name="spacy_elmo",
    help="ELMo for spaCy: embed text, convert weight files, pretrain biLMs, benchmark.",
    no_args_is_help=True,
    add_completion=False,
)

app.command("demo")(commands.demo)
app.command("embed")(embed)
app.command("convert")(commands.convert)
app.command("pretrain", context_settings=EXTRA_ARGS)(pretrain_command)
app.command("init-config")(init_config_command)
app.command("plot-curve")(plot_curve_command)
app.command("bench")(bench_command)
app.command("evaluate-lm")(evaluate_lm_command)
app.command("compare")(compare_command)
app.command("inspect")(inspect_command)
app.command("download")(download_cli)
app.command("list")(list_cli)
prepare_help(app)


def main() -> None:
    app()
