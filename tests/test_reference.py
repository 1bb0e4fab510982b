"""The reference (``docs/reference/``) against the code, so that neither drifts from the other.

Each check reads the code and the page and fails on a name missing from the page or a name the
page documents that no longer exists:

- every command of ``python -m spacy_elmo`` (the typer app's ``COMMANDS``, loaded as click
  commands) has a section in ``cli.md`` whose tables list exactly its options (long and short
  flags) and arguments (upper case), and every option has help text; the commands added to
  spaCy's CLI are named there;
- every function this package registers with spaCy (``spacy_elmo.*`` in the architectures, misc
  and readers registries) has a section in ``config.md`` listing exactly its signature's
  arguments; the ``elmo`` factory's settings (its ``DEFAULT_CONFIG`` and signature) likewise;
- every section and key of ``configs/pretrain.cfg`` (and of the settings it is validated into)
  is in ``pretraining-config.md``, with the recipes, the registered optimizers and schedules, and
  the keys a resume may change; every config file the package ships is named somewhere;
- every setting of ``adapt`` (``AdaptSettings``) is in ``adapt.md``, each with an existing option;
- errors: every exception and warning class defined in the package (found in its source by
  ``ast``, so a new class cannot be missed) is a row of ``errors.md``, and every class a row
  names exists;
- every name ``spacy_elmo`` exports is a row of ``python.md``.

A row is a Markdown table line; its first cell's backticked words are what it documents.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import inspect
import re
from pathlib import Path
from typing import Dict, List, Set

import pytest

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "docs" / "reference"
PACKAGE = REPO / "spacy_elmo"


def sections(page: str) -> Dict[str, str]:
    """``## heading`` -> the text up to the next ``## `` heading of ``docs/reference/page``."""
    text = (REFERENCE / page).read_text(encoding="utf-8")
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {heading.strip(): body for heading, body in zip(parts[1::2], parts[2::2])}


def documented(body: str) -> Set[str]:
    """The backticked words of each table row's first cell (``...`` and ``=`` endings dropped)."""
    names = set()
    for line in body.splitlines():
        if not line.startswith("| ") or re.match(r"\| -+ \|", line):
            continue
        first = line.split(" | ")[0][2:]
        names.update(word.rstrip(".") for word in re.findall(r"`([^`]+)`", first))
    return names


def _section(page: str, heading: str) -> str:
    found = sections(page)
    assert heading in found, f"docs/reference/{page}: no section '## {heading}'"
    return found[heading]


def _compare(what: str, expected: Set[str], written: Set[str]) -> List[str]:
    problems = []
    if expected - written:
        problems.append(f"{what}: not documented: {sorted(expected - written)}")
    if written - expected:
        problems.append(f"{what}: documented but not in the code: {sorted(written - expected)}")
    return problems


# ----------------------------------------------------------------------------- commands


def test_every_command_and_option_is_in_the_cli_reference():
    from spacy_elmo.cli import COMMANDS, load_command

    pages = sections("cli.md")
    written_commands = {m.group(1) for heading in pages if (m := re.fullmatch(r"`([a-z-]+)`", heading))}
    problems = _compare("commands", set(COMMANDS), written_commands)
    for name in COMMANDS:
        params = load_command(name).params
        expected = set()
        for param in params:
            if param.param_type_name == "argument":
                expected.add(param.name.upper())
            else:
                expected.update(param.opts + param.secondary_opts)
            if not (getattr(param, "help", None) or "").strip():
                problems.append(f"{name} {param.name}: no help text")
        if name in written_commands:
            problems += _compare(f"`{name}`'s options", expected, documented(pages[f"`{name}`"]))
    assert not problems, "\n".join(problems)


def test_the_commands_added_to_spacys_cli_are_named():
    from spacy.cli import app as spacy_app

    import spacy_elmo.cli.spacy_app  # noqa: F401  (registers them, as spaCy's CLI does at start)

    ours = {command.name for command in spacy_app.registered_commands if (command.name or "").startswith("elmo-")}
    text = (REFERENCE / "cli.md").read_text(encoding="utf-8")
    assert ours and not [name for name in ours if f"python -m spacy {name}" not in text], ours


# ----------------------------------------------------------------------------- the pipe and its architectures


def _registered() -> Dict[str, object]:
    """Every function registered under a ``spacy_elmo.`` name, by name."""
    from spacy.util import registry

    import spacy_elmo.pipe  # noqa: F401  (registers the architectures, the loader and the reader)

    found = {}
    for kind in ("architectures", "misc", "readers"):
        for name, function in getattr(registry, kind).get_all().items():
            if name.startswith("spacy_elmo."):
                found[name] = function
    return found


def test_every_registered_function_and_its_arguments_are_in_the_config_reference():
    registered = _registered()
    pages = sections("config.md")
    written = {m.group(1) for heading in pages if (m := re.fullmatch(r"`(spacy_elmo\.\w+\.v\d+)`", heading))}
    problems = _compare("registered functions", set(registered), written)
    for name, function in registered.items():
        if name in written:
            arguments = set(inspect.signature(function).parameters)
            problems += _compare(f"`{name}`'s arguments", arguments, documented(pages[f"`{name}`"]))
    assert not problems, "\n".join(problems)


def test_the_pipes_settings_are_in_the_config_reference():
    from spacy_elmo.pipe import DEFAULT_CONFIG, make_elmo

    factory = set(inspect.signature(make_elmo).parameters) - {"nlp", "name"}
    assert set(DEFAULT_CONFIG["elmo"]) == factory  # the default config sets every argument
    problems = _compare("[components.elmo]", factory, documented(_section("config.md", "`[components.elmo]`")))
    model_keys = set(DEFAULT_CONFIG["elmo"]["model"]) - {"@architectures"}
    problems += _compare(
        "the default model block", model_keys, documented(_section("config.md", "`spacy_elmo.ElmoModel.v2`"))
    )
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------------------- pretraining and adapt


def test_every_pretraining_config_key_is_in_its_reference():
    from confection import Config

    from spacy_elmo.pretrain.config import CONFIGS, PretrainSettings

    config = Config().from_disk(CONFIGS / "pretrain.cfg", interpolate=False)
    pages = sections("pretraining-config.md")
    written = {m.group(1) for heading in pages if (m := re.fullmatch(r"`\[(\w+)\]`", heading))}
    problems = _compare("sections", set(config), written)
    for section, keys in config.items():
        expected = set(keys)
        fields = getattr(PretrainSettings.model_fields.get(section).annotation, "model_fields", None)
        expected |= set(fields or ())  # a key the settings take that the file leaves out
        if section in written:
            problems += _compare(f"[{section}]", expected, documented(pages[f"`[{section}]`"]))
    for recipe in sorted((CONFIGS / "recipes").glob("*.cfg")):
        for section, keys in Config().from_disk(recipe, interpolate=False).items():
            unknown = set(keys) - set(config.get(section, {}))
            if unknown:
                problems.append(f"{recipe.name}: [{section}] {sorted(unknown)} are not keys of pretrain.cfg")
    assert not problems, "\n".join(problems)


def test_the_recipes_optimizers_schedules_and_resumable_keys_are_named():
    from spacy_elmo.pretrain.config import RECIPES
    from spacy_elmo.pretrain.optimizers import optimizers, schedules
    from spacy_elmo.pretrain.resume import RESUMABLE_CHANGES

    recipes = _section("pretraining-config.md", "Recipes")
    optimizer = _section("pretraining-config.md", "`[optimizer]`")
    problems = [f"recipe {name}" for name in RECIPES if f"`{name}`" not in recipes]
    problems += [f"optimizer {name}" for name in optimizers.get_all() if f'"{name}"' not in optimizer]
    problems += [f"schedule {name}" for name in schedules.get_all() if f'"{name}"' not in optimizer]
    problems += _compare("resumable keys", set(RESUMABLE_CHANGES), documented(_section("pretraining-config.md", "Resuming")))
    assert not problems, "\n".join(problems)


def test_every_config_file_the_package_ships_is_named_in_the_reference():
    text = "".join(page.read_text(encoding="utf-8") for page in REFERENCE.glob("*.md"))
    shipped = [path.relative_to(PACKAGE / "configs").as_posix() for path in (PACKAGE / "configs").rglob("*.cfg")]
    assert shipped and not [name for name in shipped if name not in text], shipped


def test_every_adapt_setting_is_in_its_reference_with_an_existing_option():
    from spacy_elmo.cli import load_command
    from spacy_elmo.pretrain.adapt import AdaptSettings

    if dataclasses.is_dataclass(AdaptSettings):
        settings = {field.name for field in dataclasses.fields(AdaptSettings)}
    else:
        settings = set(AdaptSettings.model_fields)
    table = _section("adapt.md", "Settings")
    problems = _compare("adapt's settings", settings, documented(table))
    options = {opt for param in load_command("adapt").params for opt in param.opts}
    named = set(re.findall(r"`(--[a-z-]+)`", table))
    problems += [f"adapt.md names {option}, which adapt does not take" for option in sorted(named - options)]
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------------------- errors and the Python API


def _builtin_exceptions() -> Set[str]:
    return {name for name, value in vars(builtins).items() if inspect.isclass(value) and issubclass(value, BaseException)}


def _exception_classes() -> Set[str]:
    """Classes defined in the package that derive from an exception or warning (directly, or from
    another such class of the package), found in the source."""
    bases: Dict[str, Set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases[node.name] = {getattr(base, "id", getattr(base, "attr", "")) for base in node.bases}
    found: Set[str] = set()
    while True:
        more = {name for name, parents in bases.items() if parents & (_builtin_exceptions() | found)} - found
        if not more:
            return found
        found |= more


def test_every_error_and_warning_class_is_in_the_error_reference():
    classes = _exception_classes()
    assert {"WeightFileError", "CompetingThreadsWarning", "TrainingInterrupted"} <= classes  # the scan finds them
    rows = documented((REFERENCE / "errors.md").read_text(encoding="utf-8"))
    named = {word for word in rows if re.fullmatch(r"[A-Z][A-Za-z]+", word)} - _builtin_exceptions()
    problems = _compare("exception classes", classes, named)
    assert not problems, "\n".join(problems)


def test_every_exported_name_is_in_the_python_reference():
    import spacy_elmo

    rows = documented((REFERENCE / "python.md").read_text(encoding="utf-8"))
    problems = _compare("spacy_elmo.__all__", set(spacy_elmo.__all__), rows)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", sorted(path.name for path in REFERENCE.glob("*.md")))
def test_reference_pages_carry_no_history(page):
    """A reference says what is, not when or why it changed: no dates, issue numbers or machines."""
    text = (REFERENCE / page).read_text(encoding="utf-8")
    found = re.findall(r"\b20\d\d-\d\d-\d\d\b|\bissue \d+|\b(?:Xeon|EPYC|H100|H200|A100)\b|\bprevious defaults?\b", text)
    assert not found, found
