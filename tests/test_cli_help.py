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
from typer.testing import CliRunner

import spacy_elmo
from conftest import checkout_pythonpath, cli_commands
from spacy_elmo.cli import COMMANDS, app, load_command
from spacy_elmo.cli.help import reflow

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


CLICK_COMMANDS = list(cli_commands())


@pytest.mark.parametrize("command", [path for path, _ in CLICK_COMMANDS if path], ids=" ".join)
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


@pytest.mark.parametrize(
    "path, command", CLICK_COMMANDS, ids=[" ".join(path) or "app" for path, _ in CLICK_COMMANDS]
)
def test_every_options_help_is_shown_whole(path, command):
    """rich reads ``[word ...]`` in a help text as a style tag and drops it unseen (embed's
    --chunk-size once lost its default that way): every word of every option's help is shown."""
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    shown = " ".join(line.strip("│ ") for line in result.output.splitlines()).split()
    ctx = command.make_context("spacy_elmo", [], resilient_parsing=True)
    for param in command.get_params(ctx):
        words = (getattr(param, "help", None) or "").split()
        missing = [word for word in words if not any(word in piece for piece in shown)]
        assert not missing, (param.name, missing)


# ``python -m spacy_elmo --help`` and ``--version`` as a user types them: neither imports PyTorch
# nor spaCy (seconds of start-up), and the listed summaries are the commands' own.
LISTED_ONLY = """
import runpy, sys
sys.argv = ["spacy_elmo", *sys.argv[1:]]
try:
    runpy.run_module("spacy_elmo", run_name="__main__")
except SystemExit as stop:
    assert stop.code in (0, None), stop.code
print("imported:", sorted(m for m in ("torch", "spacy", "thinc", "numpy") if m in sys.modules))
"""


@pytest.mark.parametrize("option", ["--help", "--version"])
def test_the_apps_help_and_version_import_neither_torch_nor_spacy(option):
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "COLUMNS": str(WIDTH)}
    result = subprocess.run([sys.executable, "-c", LISTED_ONLY, option], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "imported: []", result.stdout
    if option == "--help":
        for name in COMMANDS:
            assert f"│ {name} " in result.stdout, name
        for word in ("bilm-tf:", "native checkpoint:", "rank:"):  # the words the commands use, said once
            assert f"- {word}" in result.stdout
    else:
        assert result.stdout.splitlines()[0] == f"spacy-elmo {spacy_elmo.__version__}"


def test_the_console_script_shows_the_version():
    script = Path(sys.executable).with_name("spacy-elmo")  # installed by pip with the package
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout == f"spacy-elmo {spacy_elmo.__version__}\n", result.stderr


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_listed_summary_is_the_first_paragraph_of_the_commands_help(name):
    """The app's --help lists COMMANDS' summaries without loading the commands: they must say
    what each command's own help says first."""
    command = load_command(name)
    assert command.help.split("\n\n")[0] == COMMANDS[name].summary


def test_a_typo_gets_the_closest_command():
    result = CliRunner().invoke(app, ["embd", "in.txt"], env={"COLUMNS": "100", "TERM": "dumb"})
    assert result.exit_code == 2
    assert "No such command 'embd'. Did you mean 'embed'?" in " ".join(result.output.replace("│", " ").split())
