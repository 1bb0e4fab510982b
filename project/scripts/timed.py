"""Run a command and write its wall-clock time as JSON (read by `scripts/compare.py`).

python scripts/timed.py OUTPUT.json python -m spacy train ...

Exits with the command's exit status; the JSON is written only when it succeeds. A leading
`python` runs with this interpreter, as in weasel's own commands. The command's output is passed
through; each row of `spacy train`'s console table (epoch, step, ...) is also timed, into
`"evaluations": [{"epoch", "step", "seconds"}]`: the training cost of each stretch between two
evaluations, e.g. of the epochs after the first, where a frozen biLM's layers come from its cache.
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

#: A row of spaCy's console training table: epoch, step, then losses and scores.
TABLE_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+\d")


def main(output: Path, command: list) -> int:
    if command and command[0] in ("python", "python3"):
        command = [sys.executable] + command[1:]
    evaluations = []
    start = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as process:
        for line in process.stdout:
            seconds = time.perf_counter() - start
            sys.stdout.write(line)
            sys.stdout.flush()
            row = TABLE_ROW.match(line)
            if row:
                epoch, step = map(int, row.groups())
                evaluations.append({"epoch": epoch, "step": step, "seconds": round(seconds, 1)})
    returncode = process.returncode
    seconds = time.perf_counter() - start
    if returncode == 0:
        output.parent.mkdir(parents=True, exist_ok=True)
        timing = {"seconds": round(seconds, 1), "command": command[1:]}
        if evaluations:
            timing["evaluations"] = evaluations
        output.write_text(json.dumps(timing, indent=2) + "\n")
    return returncode


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
