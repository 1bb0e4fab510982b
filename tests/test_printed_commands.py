"""Every command the package prints, parsed by the command-line parser that will run it (this
package's typer app, spaCy's), so that each works pasted as printed: the next steps at the end of
``adapt`` and ``pretrain``, the line ``config`` and ``init-config`` print, the resume lines of an
interrupted ``pretrain`` and ``adapt``. A ``spacy train`` command must also run at the documented
speed: one PyTorch op thread (``OMP_NUM_THREADS=1``) and a step budget (``--training.max_steps``),
as the generated config's own (20,000 steps) runs for hours on a CPU.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import typer
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.cli.adapt import adapt_line, next_steps
from spacy_elmo.pretrain.resume import resume_command
from spacy_elmo.pretrain.summary import run_summary

runner = CliRunner()


def commands_in(text: str) -> List[str]:
    """The shell commands of printed ``text``: its lines (a config's ``#`` comments too) that
    start with ``python -m`` or an environment setting before it."""
    lines = [line.strip().lstrip("#").strip() for line in text.splitlines()]
    return [line for line in lines if line.startswith(("python -m ", "OMP_NUM_THREADS="))]


def parsed(command: str) -> Tuple[Dict[str, str], str, Any]:
    """(environment settings, module, the parsed context of its subcommand) of ``command``;
    raises its parser's usage error (click's, or typer's copy of click) where it refuses it."""
    import spacy.cli

    words = shlex.split(command)
    env = {}
    while "=" in words[0]:
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    assert words[:2] == ["python", "-m"], command
    module, name, args = words[2], words[3], words[4:]
    group = typer.main.get_command({"spacy_elmo": app, "spacy": spacy.cli.app}[module])
    parent = group.context_class(group, info_name=module)
    subcommand = group.get_command(parent, name)
    assert subcommand is not None, f"{module} has no command {name}: {command}"
    return env, module, subcommand.make_context(name, args, parent=parent)


def printed(tmp_path: Path) -> List[str]:
    """Every command the package prints, from its commands' output or from the functions they
    print through."""
    out = tmp_path / "adapted"
    result = runner.invoke(app, ["config", str(tmp_path / "train.cfg"), "--pipeline", "tagger"])
    assert result.exit_code == 0, result.output
    commands = commands_in(result.output) + commands_in((tmp_path / "train.cfg").read_text(encoding="utf-8"))
    result = runner.invoke(app, ["init-config", str(tmp_path / "pretrain.cfg")])
    assert result.exit_code == 0, result.output
    commands += commands_in(result.output)
    run = tmp_path / "pretrained"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "tokens": 10, "loss": 1.0, "seconds": 1.0}) + "\n", encoding="utf-8")
    (run / "config.cfg").write_text((tmp_path / "pretrain.cfg").read_text(encoding="utf-8"), encoding="utf-8")
    commands += commands_in(run_summary(run)) + [resume_command(run)]
    commands += next_steps(out)
    commands.append(adapt_line("en_wikitext_small", [tmp_path / "my text.txt"], out, {"tokenized": True, "max_steps": 4, "resume": True}))
    return commands


def test_every_printed_command_parses_and_spacy_train_runs_on_one_thread_with_a_budget(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my text.txt").write_text("some text\n", encoding="utf-8")
    commands = printed(tmp_path)
    trains = 0
    for command in commands:
        for word in shlex.split(command):  # the files a printed command names are the user's
            if word.endswith(".cfg") and not Path(word).exists():
                Path(word).parent.mkdir(parents=True, exist_ok=True)
                Path(word).write_text("", encoding="utf-8")
        env, module, context = parsed(command)
        if (module, context.info_name) == ("spacy", "train"):
            trains += 1
            assert env.get("OMP_NUM_THREADS") == "1", f"no single op thread: {command}"
            extra = context.args
            assert "--training.max_steps" in extra and int(extra[extra.index("--training.max_steps") + 1]) > 0, command
    assert trains == 3, commands  # config's (its output and its file's header) and adapt's
    assert len(commands) >= 9, commands


@pytest.mark.parametrize(
    "command, says",
    [
        ("python -m spacy train train.cfg --output out", "no single op thread"),
        ("OMP_NUM_THREADS=1 python -m spacy train train.cfg --output out", "--training.max_steps"),
        ("python -m spacy_elmo adapt --no-such-option", "No such option"),
    ],
)
def test_the_check_fails_where_it_should(tmp_path, monkeypatch, command, says):
    """What the test above refuses: a spaCy train command without one op thread or a budget,
    an option no parser takes."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.cfg").write_text("", encoding="utf-8")
    with pytest.raises(Exception, match=says.replace("-", r"\-")):
        env, module, context = parsed(command)
        assert env.get("OMP_NUM_THREADS") == "1", f"no single op thread: {command}"
        assert "--training.max_steps" in context.args, f"no --training.max_steps: {command}"
