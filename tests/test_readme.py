"""The README's "Using it" example, run as a script: it prints what its comments say."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

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


def test_the_using_it_example_prints_what_its_comments_say(tmp_path):
    """Both blocks: one process, then nlp.pipe(n_process=2) and a DocBin on disk with
    spacy_elmo.restore (without it the two "bank"s would print 1.00). A deadline ends the script
    and its worker processes (its own process group) if it hangs."""
    code = _python_blocks("Using it", 2)
    # Each print's comment starts with what it prints: `print(x)  # (11, 256): ...`.
    expected = re.findall(r"^print\(.*\)\s+# (.+?):", code, re.MULTILINE)
    assert len(expected) == 5 and "n_process=2" in code and "DocBin" in code, code
    (tmp_path / "using_it.py").write_text(code, encoding="utf-8")
    script = subprocess.Popen(
        [sys.executable, "using_it.py"], cwd=tmp_path, env=subprocess_env(threads=1),
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
