"""Command help on an 80-column terminal: rich wraps each paragraph once, so no line of a
description stops mid-sentence with room left for the next word (docstrings are hard-wrapped at
100 columns; before cli_help.reflow, rich re-wrapped each of those lines on its own), and no
switch shows a value placeholder ("--force <bool>")."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from conftest import checkout_pythonpath
from spacy_elmo.cli import app
from spacy_elmo.cli_help import reflow

REPO = Path(__file__).resolve().parents[1]
WIDTH = 80


def _description(help_output: str) -> list:
    """The lines between the usage line and the first panel (rich) or "Arguments:"/"Options:"
    (click's plain format, which spaCy's CLI uses): the command's docstring."""
    lines = help_output.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    ends = ("╭", "Arguments:", "Options:")
    end = next((i for i, line in enumerate(lines) if line.lstrip().startswith(ends)), len(lines))
    return [line.strip() for line in lines[start:end]]


def _cut_short(description: list) -> list:
    """Pairs of lines of one paragraph where the first line had room for the next word."""
    cut = []
    for line, following in zip(description, description[1:]):
        if line and following and not following.startswith(("-", "*")):
            if len(line) + 1 + len(following.split()[0]) <= WIDTH - 4:
                cut.append((line, following))
    return cut


def _commands(typer_app, prefix=()):
    for command in typer_app.registered_commands:
        yield (*prefix, command.name)
    for group in typer_app.registered_groups:
        yield from _commands(group.typer_instance, (*prefix, group.name))


@pytest.mark.parametrize("command", list(_commands(app)), ids=" ".join)
def test_every_command_wraps_its_help_once(command):
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": str(WIDTH), "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    description = _description(result.output)
    assert any(description), result.output
    assert _cut_short(description) == []


@pytest.mark.parametrize(
    "argv", [["-m", "spacy_elmo", "embed", "--help"], ["-m", "spacy", "elmo-pretrain", "--help"]]
)
def test_help_in_a_terminal_of_80_columns(argv):
    """As a user sees it: python -m spacy_elmo, and the command spaCy's CLI gets from the plugin
    (spaCy's CLI formats help with click, which reflows paragraphs itself)."""
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "COLUMNS": str(WIDTH), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    description = _description(result.stdout)
    assert any(description)
    assert _cut_short(description) == []
    assert max(len(line) for line in result.stdout.splitlines()) <= WIDTH


def test_reflow_joins_paragraph_lines_and_keeps_lists():
    text = """First line.

    A paragraph cut
    in two.

    - an item
      continued
    - another item

    \b
    kept   as
    is
    """
    assert reflow(text) == "First line.\n\nA paragraph cut in two.\n\n- an item\n  continued\n- another item\n\n\b\nkept   as\nis"


def _click_commands(command, path=()):
    """(path, click command) of the app, every group and every command below it."""
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _click_commands(sub, (*path, name))


CLICK_COMMANDS = list(_click_commands(typer.main.get_command(app)))
# The first line of an option's row in the options panel: a "*" if required, its names, then
# the type column ("│ --threads  <int>  ...", "│ *  --output  -o  <path>  ...", "│ --force  ...").
OPTION_ROW = re.compile(r"^│ [* ]{0,3}((?:-{1,2}[\w-]+ +)+)(<[^>]*>)?")


@pytest.mark.parametrize(
    "path, command", CLICK_COMMANDS, ids=[" ".join(path) or "app" for path, _ in CLICK_COMMANDS]
)
def test_switches_show_no_value_placeholder(path, command):
    """Every flag of every command and group (--force, --resume, --isolate/--no-isolate, --help)
    takes no value, so its row of --help names no type; options that take one keep theirs."""
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    ctx = command.make_context("spacy_elmo", [], resilient_parsing=True)
    params = [p for p in command.get_params(ctx) if p.param_type_name == "option" and not p.hidden]
    flags = {name for p in params if p.is_flag for name in (*p.opts, *p.secondary_opts)}
    valued = {name for p in params if not p.is_flag for name in p.opts}
    assert "--help" in flags
    rows = {}
    for line in result.output.splitlines():
        match = OPTION_ROW.match(line)
        if match:
            rows.update({name: match.group(2) for name in match.group(1).split()})
    shown = set(rows)
    assert flags <= shown and valued <= shown, result.output
    assert {name: rows[name] for name in flags if rows[name]} == {}, result.output
    assert all(rows[name] for name in valued), result.output  # e.g. "--threads <int>" stays
