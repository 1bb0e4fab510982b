"""The README's "Using it" example, run as a script: it prints what its comments say."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import pytest

from benchmarks.subprocesses import subprocess_env

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks(section: str, count: int) -> str:
    """The first ``count`` python blocks under ``## section``, as one script."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {section}\n")
    end = text.find("\n## ", start + 1)
    blocks = re.compile(r"```python\n(.*?)```", re.DOTALL).findall(text, start, end)
    assert len(blocks) >= count, f"README.md: fewer than {count} python blocks under '## {section}'"
    return "\n".join(blocks[:count])


@pytest.mark.slow
def test_the_using_it_example_prints_what_its_comments_say(tmp_path):
    """Both blocks: one process, then nlp.pipe(n_process=2) and a DocBin on disk with
    spacy_elmo.restore (without it the two "bank"s would print 1.00). Run with PyTorch's
    default thread count in the environment, as a user's script starts: the example's own
    torch.set_num_threads(1) is the fast path, so the pipe has nothing to warn about. A deadline
    ends the script and its worker processes (its own process group) if it hangs."""
    code = _python_blocks("Using it", 2)
    # Each print's comment starts with what it prints: `print(x)  # (11, 256): ...`.
    expected = re.findall(r"^print\(.*\)\s+# (.+?):", code, re.MULTILINE)
    assert len(expected) == 5 and "n_process=2" in code and "DocBin" in code, code
    (tmp_path / "using_it.py").write_text(code, encoding="utf-8")
    script = subprocess.Popen(
        [sys.executable, "using_it.py"], cwd=tmp_path,
        env={k: v for k, v in subprocess_env().items() if k != "OMP_NUM_THREADS"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        out, err = script.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(script.pid, signal.SIGKILL)
        script.communicate()
        pytest.fail("the README's example hung (killed after 240 s)")
    assert script.returncode == 0, err[-3000:]
    assert out.splitlines() == expected
    assert code.index("torch.set_num_threads(1)") < code.index("nlp = ")
    assert "CompetingThreadsWarning" not in err, err[-3000:]


def _sections() -> List[str]:
    return re.findall(r"^## (.+)$", README.read_text(encoding="utf-8"), re.MULTILINE)


def _bash_lines(section: Optional[str] = None) -> List[str]:
    """The lines of the README's bash blocks (under ``## section`` only, if given)."""
    text = README.read_text(encoding="utf-8")
    if section is not None:
        start = text.index(f"## {section}\n")
        end = text.find("\n## ", start + 1)
        text = text[start : end if end > 0 else None]
    blocks = re.compile(r"```bash\n(.*?)```", re.DOTALL).findall(text)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_the_readme_starts_with_the_start():
    """What it is, then the two commands CI runs (exactly two bash blocks: .ci/run reads them),
    then how to use it; the measured figures after, as a table."""
    sections = _sections()
    assert sections[:2] == ["Two commands", "Using it"], sections
    text = README.read_text(encoding="utf-8")
    two = text[text.index("## Two commands\n") : text.index("## Using it\n")]
    assert two.count("```bash\n") == 2
    assert sections.index("What is measured") > sections.index("Pretraining your own biLM")
    assert "Packaging a pipeline" in sections


def test_spacys_commands_run_with_one_op_thread():
    """Every spaCy training or evaluation command the README shows sets one PyTorch op thread:
    PyTorch's default is the path that collapses beside a busy process."""
    spacy_commands = [line for line in _bash_lines() if re.search(r"python -m spacy (train|evaluate)\b", line)]
    assert spacy_commands
    for line in spacy_commands:
        assert line.startswith("OMP_NUM_THREADS=1 python -m spacy "), line


def test_pretraining_shows_how_to_shorten_it_and_the_resume_line_as_printed():
    """The README's pretraining command sets max_steps, and the resume line it quotes is the one a
    stopped run prints (``pretrain.resume.resume_command``)."""
    from spacy_elmo.pretrain.resume import resume_command

    pretrain = [line for line in _bash_lines("Pretraining your own biLM") if " pretrain " in line]
    assert pretrain and all("--training.max_steps" in line for line in pretrain)
    assert f"`{resume_command(Path('out'), world_size=1)}`" in README.read_text(encoding="utf-8")
