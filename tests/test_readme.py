"""The README's "Using it" example, run as a script: it prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from benchmarks.subprocesses import subprocess_env

README = Path(__file__).resolve().parents[1] / "README.md"


def _first_python_block(section: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {section}\n")
    match = re.compile(r"```python\n(.*?)```", re.DOTALL).search(text, start)
    assert match is not None, f"README.md: no python block under '## {section}'"
    return match.group(1)


def test_the_using_it_example_prints_what_its_comments_say(tmp_path):
    code = _first_python_block("Using it")
    # Each print's comment starts with what it prints: `print(x)  # (11, 256): ...`.
    expected = re.findall(r"^print\(.*\)\s+# (.+?):", code, re.MULTILINE)
    assert len(expected) == 3, code
    (tmp_path / "using_it.py").write_text(code, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "using_it.py"], cwd=tmp_path, env=subprocess_env(threads=1),
        capture_output=True, text=True, timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == expected
