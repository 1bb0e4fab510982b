"""Run a command and write its wall-clock time as JSON (read by `python -m spacy_elmo compare`).

python scripts/timed.py OUTPUT.json python -m spacy train ...

Exits with the command's exit status; the JSON is written only when it succeeds. A leading
`python` runs with this interpreter, as in weasel's own commands.
"""

import json
import subprocess
import sys
import time
from pathlib import Path


def main(output: Path, command: list) -> int:
    if command and command[0] in ("python", "python3"):
        command = [sys.executable] + command[1:]
    start = time.perf_counter()
    returncode = subprocess.run(command).returncode
    seconds = time.perf_counter() - start
    if returncode == 0:
        output.parent.mkdir(parents=True, exist_ok=True)
        timing = {"seconds": round(seconds, 1), "command": command[1:]}
        output.write_text(json.dumps(timing, indent=2) + "\n")
    return returncode


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
