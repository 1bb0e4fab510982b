"""Train and evaluate one system's components at several seeds (the `*-seeds` commands).

python scripts/seeds.py bundled 0,1,2 --max-steps 2000 --eval-frequency 200 [--bilm DIR] [--precision int8]
python scripts/seeds.py baseline 0,1,2 --max-steps 2000 --eval-frequency 200
python scripts/seeds.py bundled 0,1,2 --tasks textcat --max-steps 1500 --eval-frequency 250
python scripts/seeds.py bundled 0,1,2 --tasks ner --bilm training/adapted/wnut17 --name adapted-wnut17 ...
python scripts/seeds.py bundled 0 --tasks ner --name finetuned --set components.elmo.frozen=false ...
python scripts/seeds.py evaluate 0,1,2 --system bundled --precision int8
python scripts/seeds.py compare 0,1,2 --label "ELMo (bundled biLM)"

For each seed: `spacy train` (timed by scripts/timed.py) into training/seeds/SYSTEM/sSEED/TASK, then
`spacy evaluate` of model-best on the test set into metrics/seeds/SYSTEM/sSEED/TASK.json, the
layout `python scripts/compare.py "LABEL=DIR,DIR,DIR"` reads. With ``--precision P`` the elmo
pipe runs in precision P while training (frozen biLM: the layers the listeners learn from), and the
system is named SYSTEM-P. ``evaluate --system S --precision P`` scores S's trained models with their
elmo pipe switched to precision P (the saved float weights, another setting) into
metrics/seeds/S-as-P/: a model trained on the exact biLM, run with a fast one. A seed whose metrics already
exist is skipped, so an interrupted run picks up where it stopped. One seed differs from another
only in `[system] seed` (weight initialisation, dropout, batch order). `compare` writes
metrics/comparison_seeds.md and .png: per-seed scores, means, standard deviations, paired gaps.
``--tasks`` picks the components (default: the tagger and the NER): `textcat` (SST-5) and
`parser` (UD English-EWT dependencies) are the `sst5` and `parser` workflows'.
"""

import argparse
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

TASKS = {
    "tagger": ("corpus/ewt/en_ewt-ud-train.spacy", "corpus/ewt/en_ewt-ud-dev.spacy", "corpus/ewt/en_ewt-ud-test.spacy"),
    "ner": ("corpus/wnut17/wnut17train.spacy", "corpus/wnut17/emerging.dev.spacy", "corpus/wnut17/emerging.test.spacy"),
    "textcat": ("corpus/sst5/stsa.fine.train.spacy", "corpus/sst5/stsa.fine.dev.spacy", "corpus/sst5/stsa.fine.test.spacy"),
    "parser": ("corpus/ewt/en_ewt-ud-train.spacy", "corpus/ewt/en_ewt-ud-dev.spacy", "corpus/ewt/en_ewt-ud-test.spacy"),
}
DEFAULT_TASKS = "tagger,ner"
CONFIGS = {"bundled": "elmo", "baseline": "baseline"}


def run(command: list) -> None:
    print("$ " + " ".join(command), flush=True)
    if subprocess.run(command).returncode != 0:
        sys.exit(f"seeds.py: failed: {' '.join(command)}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("system", choices=sorted(CONFIGS) + ["compare", "evaluate"])
    parser.add_argument("seeds", help="comma-separated seeds, e.g. 0,1,2")
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--eval-frequency", type=int)
    parser.add_argument("--label", default="ELMo (bundled biLM)", help="compare: the ELMo system's label")
    parser.add_argument("--bilm", default="null", help="the ELMo systems' biLM (null: bundled)")
    parser.add_argument("--elmo-threads", help="the elmo pipe's threads (default: its config's, \"auto\")")
    parser.add_argument("--name", help="the system's directory under training/seeds and metrics/seeds (default: SYSTEM)")
    parser.add_argument("--gpu-id", default="-1")
    parser.add_argument("--precision", help="the elmo pipe's precision (training, or evaluate)")
    parser.add_argument("--system", dest="trained", default="bundled", help="evaluate: whose models")
    parser.add_argument("--tasks", default=DEFAULT_TASKS, help=f"comma-separated, of {', '.join(TASKS)}")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="a config override for spacy train, e.g. components.elmo.frozen=false (repeatable)",
    )  # fmt: skip
    parser.add_argument("--title", help="compare: the table's heading")
    parser.add_argument("--output", default="metrics/comparison_seeds", help="compare: OUTPUT.md and OUTPUT.png")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    tasks = args.tasks.split(",")
    if not set(tasks) <= set(TASKS):
        sys.exit(f"seeds.py: --tasks must name some of {', '.join(TASKS)}, got {args.tasks!r}")
    try:
        seeds = [int(seed) for seed in args.seeds.split(",")]
    except ValueError:
        sys.exit(f"seeds.py: seeds must be comma-separated integers, got {args.seeds!r}")
    if args.system == "compare":
        compare(args.label, seeds, args.title, args.output)
        return
    if args.system == "evaluate":
        if args.precision is None:
            sys.exit("seeds.py: evaluate needs --precision")
        for seed in seeds:
            for task in tasks:
                test = TASKS[task][2]
                model = Path("training/seeds") / args.trained / f"s{seed}" / task / "model-best"
                output = Path("metrics/seeds") / f"{args.trained}-as-{args.precision}" / f"s{seed}" / f"{task}.json"
                evaluate_with_precision(model, test, args.precision, output)
        return
    train_and_evaluate(args, seeds, tasks)


def train_and_evaluate(args: argparse.Namespace, seeds: List[int], tasks: List[str]) -> None:
    """`spacy train` then `spacy evaluate` of each task at each seed; a seed whose scores exist is
    skipped, so an interrupted run continues where it stopped."""
    name = args.name or args.system
    name = name if args.precision is None else f"{name}-{args.precision}"
    if args.max_steps is None or args.eval_frequency is None:
        sys.exit("seeds.py: training needs --max-steps and --eval-frequency")
    for seed in seeds:
        for task in tasks:
            train, dev, test = TASKS[task]
            metrics = Path("metrics/seeds") / name / f"s{seed}"
            if (metrics / f"{task}.json").exists():
                print(f"{metrics / f'{task}.json'} exists: skipped", flush=True)
                continue
            output = Path("training/seeds") / name / f"s{seed}" / task
            config = f"configs/{task}_{CONFIGS[args.system]}.cfg"
            command = [
                sys.executable, "scripts/timed.py", str(metrics / f"{task}_train.json"),
                sys.executable, "-m", "spacy", "train", config, "--output", str(output),
                "--paths.train", train, "--paths.dev", dev, "--gpu-id", args.gpu_id,
                "--system.seed", str(seed), "--training.max_epochs", "0",
                "--training.max_steps", str(args.max_steps),
                "--training.eval_frequency", str(args.eval_frequency),
            ]  # fmt: skip
            if CONFIGS[args.system] == "elmo":
                command += ["--paths.bilm", args.bilm]
                if args.elmo_threads is not None:
                    command += ["--components.elmo.model.threads", args.elmo_threads]
                if args.precision is not None:
                    command += ["--components.elmo.model.precision", args.precision]
            for override in args.set:
                key, _, value = override.partition("=")
                command += [f"--{key}", value]
            run(command)
            run([
                sys.executable, "-m", "spacy", "evaluate", str(output / "model-best"), test,
                "--output", str(metrics / f"{task}.json"), "--gpu-id", args.gpu_id,
            ])  # fmt: skip


def evaluate_with_precision(model: Path, test: str, precision: str, output: Path) -> None:
    """`spacy evaluate`'s scores of ``model`` on ``test`` with the elmo pipe in ``precision``."""
    import spacy
    import srsly
    from spacy.training import Corpus

    if output.exists():
        print(f"{output} exists: skipped", flush=True)
        return
    print(f"$ evaluate {model} on {test} with precision {precision}", flush=True)
    nlp = spacy.load(model, config={"components": {"elmo": {"model": {"precision": precision}}}})
    scores = nlp.evaluate(Corpus(test)(nlp))
    output.parent.mkdir(parents=True, exist_ok=True)
    srsly.write_json(output, scores)


def compare(label: str, seeds: list, title: Optional[str], output: str) -> None:
    def runs(system: str) -> str:
        return ",".join(f"metrics/seeds/{system}/s{seed}" for seed in seeds)

    title = title or "UD English-EWT UPOS tagging and WNUT17 NER, test sets"
    run([
        sys.executable, str(Path(__file__).with_name("compare.py")), f"{label}={runs('bundled')}",
        f"spaCy tok2vec={runs('baseline')}", "--output", f"{output}.md", "--plot", f"{output}.png",
        "--title", f"{title}, seeds {','.join(map(str, seeds))}",
    ])  # fmt: skip


if __name__ == "__main__":
    main()
