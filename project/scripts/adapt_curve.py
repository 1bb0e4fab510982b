"""Components along an adaptation: for each biLM (checkpoints of `adapt`, or any biLMs to
compare), a task's component trained on it at some seeds, the layer mix that component learned,
and forgetting (WikiText-2 valid perplexity with a softmax refitted to the frozen biLM), in one JSON
and (with --plot) a chart.

python scripts/adapt_curve.py OUTPUT.json --task ner --seeds 0 --bilm 0=bundled --bilm 25=DIR ...
    [--max-steps 2000 --eval-frequency 200] [--name curve] [--no-forgetting] [--plot OUTPUT.png]

--bilm LABEL=DIR: a biLM directory (options.json + model.safetensors; "bundled": the bundled one);
a numeric LABEL is the x axis of the plot (the adaptation's update). The component: `seeds.py`
at the task's budget into training/seeds/NAME-LABEL (a seed already scored is skipped). Forgetting:
the protocol of docs/results/adapt/README.md (a sampled softmax, 4,096 negatives, fitted to the
frozen biLM on WikiText-2 train, 200 updates of 1,280 tokens at learning rate 0.003, scored on
valid's first 50,000 tokens) into training/curve/wikitext2-NAME-LABEL. Run from project/.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import srsly

#: The score each task's component is judged by (``spacy evaluate``'s key), as seeds.py trains it.
METRICS = {"ner": "ents_f", "tagger": "tag_acc", "textcat": "cats_macro_f", "parser": "dep_las"}
WIKITEXT = Path("assets/wikitext-2")
WIKITEXT_MIRROR = Path("../../shared/data/wikitext-2")
BUNDLED = Path(__file__).resolve().parents[2] / "spacy_elmo" / "models" / "en_wikitext_small"


def run(command: List[str]) -> None:
    print("$ " + " ".join(command), flush=True)
    if subprocess.run(command).returncode != 0:
        sys.exit(f"adapt_curve.py: failed: {' '.join(command)}")


def component(label: str, bilm: str, args: argparse.Namespace) -> List[Dict]:
    """The task's component on ``bilm`` at each seed: test score, training time, learned mix."""
    name = f"{args.name}-{label}"
    run([
        sys.executable, "scripts/seeds.py", "bundled", args.seeds, "--tasks", args.task, "--bilm",
        "null" if bilm == "bundled" else bilm, "--name", name, "--elmo-threads", "1",
        "--max-steps", str(args.max_steps), "--eval-frequency", str(args.eval_frequency),
    ])  # fmt: skip
    runs = []
    for seed in args.seeds.split(","):
        metrics = Path("metrics/seeds") / name / f"s{seed}"
        mix_file = metrics / f"{args.task}_mix.json"
        if not mix_file.exists():
            model = Path("training/seeds") / name / f"s{seed}" / args.task / "model-best"
            run([sys.executable, "-m", "spacy_elmo", "inspect", str(model), "--output", str(mix_file)])
        mix = srsly.read_json(mix_file)[0]
        scores = srsly.read_json(metrics / f"{args.task}.json")
        seconds = srsly.read_json(metrics / f"{args.task}_train.json").get("seconds")
        runs.append({
            "seed": int(seed), "score": 100 * scores[METRICS[args.task]], "train_seconds": seconds,
            "mix": mix["weights"], "gamma": mix["gamma"],
        })  # fmt: skip
    return runs


def wikitext2_ppl(label: str, bilm: str, args: argparse.Namespace) -> float:
    """Valid perplexity (first 50,000 tokens) of a softmax fitted to the frozen ``bilm``."""
    work = Path("training/curve") / f"wikitext2-{args.name}-{label}"
    metrics = work / "fit" / "metrics.jsonl"
    if not metrics.exists():
        weights = work / "bilm"  # the biLM alone: a softmax beside it would start the fit
        weights.mkdir(parents=True, exist_ok=True)
        for name in ("options.json", "model.safetensors"):
            shutil.copyfile((BUNDLED if bilm == "bundled" else Path(bilm)) / name, weights / name)
        config = work / "continue.cfg"
        run([sys.executable, "-m", "spacy_elmo", "init-config", str(config), "--model", str(BUNDLED)])
        data = WIKITEXT if WIKITEXT.is_dir() else WIKITEXT_MIRROR
        run([
            sys.executable, "-m", "spacy_elmo", "pretrain", str(config), str(work / "fit"),
            "--paths.init_bilm", str(weights), "--paths.train", str(data / "train.txt"),
            "--paths.dev", str(data / "valid.txt"), "--paths.vocab", str(BUNDLED / "vocab.txt"),
            "--objective.softmax", "sampled", "--objective.n_negative_samples", "4096",
            "--optimizer.learning_rate", "0.003", "--optimizer.schedule", "constant",
            "--optimizer.warmup_steps", "10", "--initialize.softmax_only_steps", "200",
            "--training.max_steps", "200", "--training.eval_every", "200", "--training.batch_tokens", "1280",
            "--corpus.dev_max_tokens", "50000", "--threads", "1",
        ])  # fmt: skip
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    return [r["dev_ppl"] for r in records if "dev_ppl" in r][-1]


def plot(rows: List[Dict], task: str, output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [(float(r["label"]), r) for r in rows if r["label"].replace(".", "", 1).isdigit()]
    xs = [x for x, _ in points]
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for seed in sorted({run["seed"] for _, r in points for run in r["runs"]}):
        ys = [next(run["score"] for run in r["runs"] if run["seed"] == seed) for _, r in points]
        ax.plot(xs, ys, "o-", label=f"{task} test score, seed {seed}")
    ax.set(xlabel="updates of the whole biLM (adapt)", ylabel=f"{task} test {METRICS[task]} (x100)")
    if all("wikitext2_ppl" in r for _, r in points):
        right = ax.twinx()
        right.plot(xs, [r["wikitext2_ppl"] for _, r in points], "s--", color="grey", label="WikiText-2 valid ppl")
        right.set_ylabel("WikiText-2 valid perplexity (forgetting)")
        right.legend(loc="lower right", fontsize=8)
    ax.legend(loc="lower left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(output, dpi=120)
    print(f"Wrote {output}")


def parse_bilms(values: List[str]) -> List[Tuple[str, str]]:
    pairs = [value.partition("=")[::2] for value in values]
    if any(not label or not path for label, path in pairs):
        sys.exit("adapt_curve.py: --bilm takes LABEL=DIR")
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--task", choices=sorted(METRICS), default="ner")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--bilm", action="append", required=True, help="LABEL=DIR")
    parser.add_argument("--max-steps", type=int, default=2000)
    parser.add_argument("--eval-frequency", type=int, default=200)
    parser.add_argument("--name", default="curve")
    parser.add_argument("--no-forgetting", action="store_true")
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    rows = []
    for label, bilm in parse_bilms(args.bilm):
        row = {"label": label, "bilm": bilm, "runs": component(label, bilm, args)}
        if not args.no_forgetting:
            row["wikitext2_ppl"] = wikitext2_ppl(label, bilm, args)
        rows.append(row)
        srsly.write_json(args.output, {"task": args.task, "metric": METRICS[args.task], "rows": rows})
    print(f"Wrote {args.output}")
    if args.plot is not None:
        plot(rows, args.task, args.plot)


if __name__ == "__main__":
    main()
