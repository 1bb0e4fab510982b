"""The elmo pipe on PyTorch's default op threads and on one, beside a busy process, for two
checkouts in the same run: each cell a fresh process (``nlp.pipe`` over the package's bench text,
the bundled model, a sentencizer, after one untimed batch), the cells' order reversed every other
round, one process spinning on a core the whole time (``--no-busy``: none).

    python docs/results/default_threads/bench.py /work/base . --rounds 4 -o docs/results/default_threads/pipe_busy.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

CELL = """
import json, time, warnings
import spacy, torch
from spacy_elmo.bench.text import DEFAULT_TEXT, text_lines
warnings.simplefilter("ignore")
lines = text_lines(DEFAULT_TEXT)
nlp = spacy.blank("en")
nlp.add_pipe("sentencizer")
nlp.add_pipe("elmo")
nlp.initialize()
texts = [lines[i % len(lines)] for i in range({docs})]
list(nlp.pipe(texts[:{batch}], batch_size={batch}))
start = time.perf_counter()
tokens = sum(len(doc) for doc in nlp.pipe(texts[{batch}:], batch_size={batch}))
seconds = time.perf_counter() - start
print(json.dumps({{"tokens": tokens, "seconds": seconds, "torch_threads": torch.get_num_threads(),
                  "elmo_threads": nlp.get_pipe("elmo").runner.threads}}))
"""


def run_cell(checkout: Path, op_threads: str, batches: int, batch: int) -> dict:
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = str(checkout)
    if op_threads == "one":
        env["OMP_NUM_THREADS"] = "1"
    code = CELL.format(docs=(batches + 1) * batch, batch=batch)
    out = subprocess.run([sys.executable, "-c", code], cwd=checkout, env=env, check=True, capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {**result, "tokens_per_s": result["tokens"] / result["seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs=2, type=Path, help="Two checkouts: before and after")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batches", type=int, default=4, help="Timed nlp.pipe batches per cell")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--no-busy", action="store_true", help="No busy process beside the cells")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    cells = [(checkout.resolve(), op) for op in ("default", "one") for checkout in args.checkouts]
    runs = {cell: [] for cell in cells}
    busy = None if args.no_busy else subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        for round_ in range(args.rounds):
            for cell in cells if round_ % 2 == 0 else cells[::-1]:
                runs[cell].append(run_cell(*cell, args.batches, args.batch_size))
                print(f"round {round_ + 1}: {cell[0]} {cell[1]}: {runs[cell][-1]['tokens_per_s']:,.0f} tokens/s", flush=True)
    finally:
        if busy is not None:
            busy.kill()
    rows = [
        {"checkout": str(checkout), "op_threads": op, "median_tokens_per_s": statistics.median(r["tokens_per_s"] for r in runs[(checkout, op)]), "runs": runs[(checkout, op)]}
        for checkout, op in cells
    ]
    fastest = max(row["median_tokens_per_s"] for row in rows)
    for row in rows:
        row["x_fastest"] = row["median_tokens_per_s"] / fastest
        print(f"{row['checkout']:40} {row['op_threads']:8} {row['median_tokens_per_s']:8,.0f} tokens/s  {row['x_fastest']:.2f}x the fastest")
    if args.output:
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")), platform.processor())
        system = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "date": time.strftime("%Y-%m-%d"), "busy_neighbour": not args.no_busy, "load_average": os.getloadavg()}
        args.output.write_text(json.dumps({"system": system, "settings": vars(args) | {"checkouts": [str(c) for c in args.checkouts], "output": str(args.output)}, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
