"""The adaptation measurements: docs/results/adapt/adapt.json, the two tables of docs/results/adapt.md (printed)
and docs/results/adapt/adapt.png.

Run from the repository root after the `adapt` workflow, with EVAL_DIR holding the evaluations
docs/results/adapt/README.md lists (`evaluate-lm` lines `dev-DOMAIN-{before,after}.txt` and the WikiText-2 softmax
fits `wt-fit-{bundled,DOMAIN}/`):

    python project/scripts/adapt_results.py EVAL_DIR "CPU model name"

The unadapted and tok2vec scores are the committed ones of the same configs and budgets
(docs/results/seeds, docs/results/sst5, docs/results/int8/bundled); the adapted ones come from
project/metrics/seeds/adapted-* and are copied next to the JSON.
"""

import json
import re
import shutil
import statistics
import sys
from pathlib import Path

PROJECT = Path("project")
OUT = Path("docs/results/adapt")
RESULTS = Path("docs/results")
#: domain -> task, score key, label, budget, the committed unadapted and tok2vec runs
DOMAINS = {
    "wnut17": ("ner", "ents_f", "WNUT17 NER F1", "2,000 updates, eval every 200", "seeds/stage5", "seeds/tok2vec"),
    "ewt": ("tagger", "tag_acc", "UD EWT UPOS accuracy", "2,000 updates, eval every 200", "seeds/stage5", "seeds/tok2vec"),
    "sst5": ("textcat", "cats_micro_f", "SST-5 accuracy", "1,500 updates, eval every 250", "sst5/bundled", "sst5/tok2vec"),
}
TEXT = {"wnut17": "tweets (WNUT17 train)", "ewt": "web text (UD EWT train)", "sst5": "movie reviews (SST-5 train)"}
LINE = re.compile(r"on ([\d,]+) targets: forward ([\d.]+), backward ([\d.]+), average ([\d.]+)")


def perplexity_line(path: Path):
    match = LINE.search(path.read_text()) if path.exists() else None
    if match is None:
        return None
    return {"targets": int(match[1].replace(",", "")), "forward": float(match[2]), "backward": float(match[3]), "average": float(match[4])}


def softmax_fit(evals: Path, name: str):
    """The held-out WikiText-2 evaluation at the end of a softmax fitted to a frozen biLM."""
    path = evals / f"wt-fit-{name}" / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if "dev_ppl" in line] if path.exists() else []
    if not records:
        return None
    last = records[-1]
    return {"targets": last["dev_tokens"], "forward": last["dev_ppl_forward"], "backward": last["dev_ppl_backward"], "average": last["dev_ppl"], "softmax_steps": last["step"]}


def scores(directory: Path, task: str, key: str, copy_to=None):
    per_seed, seconds = [], []
    for seed in range(3):
        score, timing = directory / f"s{seed}" / f"{task}.json", directory / f"s{seed}" / f"{task}_train.json"
        if not score.exists():
            continue
        per_seed.append(100 * json.loads(score.read_text())[key])
        seconds.append(json.loads(timing.read_text())["seconds"] if timing.exists() else None)
        if copy_to is not None:
            (copy_to / f"s{seed}").mkdir(parents=True, exist_ok=True)
            for file in (score, timing):
                if file.exists():
                    shutil.copy(file, copy_to / f"s{seed}" / file.name)
    return {"per_seed": per_seed, "train_seconds": seconds, "source": str(copy_to or directory)}


def collect(evals: Path, cpu: str) -> dict:
    result = {"cpu": cpu, "threads": 1, "domains": {}}
    for domain, (task, key, label, budget, unadapted, tok2vec) in DOMAINS.items():
        run = PROJECT / "training" / "adapted" / domain
        if not (run / "adapt" / "summary.json").exists():
            continue
        dest = OUT / domain
        dest.mkdir(parents=True, exist_ok=True)
        for source, name in (
            (run / "adapt" / "summary.json", "adapt_summary.json"),
            (run / "metrics.jsonl", "adapt_metrics.jsonl"),
            (run / "adapt" / "softmax-fit" / "metrics.jsonl", "softmax_fit_metrics.jsonl"),
            (run / "config.cfg", "adapt_config.cfg"),
        ):
            shutil.copy(source, dest / name)
        systems = {
            "adapted": scores(PROJECT / "metrics" / "seeds" / f"adapted-{domain}", task, key, dest),
            "unadapted": scores(RESULTS / unadapted, task, key),
            "tok2vec": scores(RESULTS / tok2vec, task, key),
        }
        if task in ("ner", "tagger"):
            systems["unadapted, another run"] = scores(RESULTS / "int8" / "bundled", task, key)
        rerun = PROJECT / "metrics" / "seeds" / "unadapted-rerun"
        if (rerun / "s0" / f"{task}.json").exists():
            systems["unadapted, re-run here"] = scores(rerun, task, key, OUT / "unadapted-rerun")
        if task == "textcat":  # SST-5's second figure, as the sst5 results report it
            systems_macro = {name: scores(Path(v["source"]) if name != "adapted" else dest, task, "cats_macro_f") for name, v in systems.items()}
        result["domains"][domain] = {
            "task": task,
            "metric": label,
            "budget": budget,
            "adapt": json.loads((run / "adapt" / "summary.json").read_text()),
            "dev_split_text": {when: perplexity_line(evals / f"dev-{domain}-{when}.txt") for when in ("before", "after")},
            "wikitext2_valid_first_50k_softmax_refitted": {"before": softmax_fit(evals, "bundled"), "after": softmax_fit(evals, domain)},
            "scores": systems,
        }
        if task == "textcat":
            result["domains"][domain]["scores_macro_f"] = systems_macro
    return result


def change(before: float, after: float) -> str:
    return f"{(after / before - 1) * 100:+.1f}%"


def minutes(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 60} min {seconds % 60:02d} s"


def summary(values) -> str:
    if not values:
        return "-"
    mean = f"{statistics.mean(values):.2f}" + (f" ({statistics.stdev(values):.2f})" if len(values) > 1 else "")
    return ", ".join(f"{v:.2f}" for v in values) + f"; **{mean}**"


def tables(result: dict) -> str:
    rows = [
        "| text adapted on | tokens: train / held out | held-out perplexity, before -> after | the task's dev text | WikiText-2 valid, softmax refitted | time (1 thread) | updates (best) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for domain, entry in result["domains"].items():
        a, dev, wiki = entry["adapt"], entry["dev_split_text"], entry["wikitext2_valid_first_50k_softmax_refitted"]
        pair = lambda b, f: f"{b:.1f} -> {f:.1f} ({change(b, f)})"  # noqa: E731
        wiki_cell = pair(wiki["before"]["average"], wiki["after"]["average"]) if wiki["before"] and wiki["after"] else "-"
        dev_cell = pair(dev["before"]["average"], dev["after"]["average"]) if dev["before"] and dev["after"] else "-"
        rows.append(
            f"| {TEXT[domain]} | {a['train_tokens']:,} / {a['heldout_tokens']:,} | "
            f"{a['ppl_before']:.1f} -> **{a['ppl_after']:.1f}** ({change(a['ppl_before'], a['ppl_after'])}) | "
            f"{dev_cell} | {wiki_cell} | {minutes(a['seconds'])} | {a['steps']} ({a['best_step']}) |"
        )
    rows += ["", "| task, test set (budget) | system | per seed; **mean (sd)** | adapted minus this, per seed |", "| --- | --- | --- | --- |"]
    for entry in result["domains"].values():
        adapted = entry["scores"]["adapted"]["per_seed"]
        for name, system in entry["scores"].items():
            gaps = "" if name == "adapted" else ", ".join(f"{x - y:+.2f}" for x, y in zip(adapted, system["per_seed"]))
            rows.append(f"| {entry['metric']} ({entry['budget']}) | {name} | {summary(system['per_seed'])} | {gaps} |")
        macro = entry.get("scores_macro_f", {})
        for name, system in macro.items():
            gaps = "" if name == "adapted" else ", ".join(f"{x - y:+.2f}" for x, y in zip(macro["adapted"]["per_seed"], system["per_seed"]))
            rows.append(f"| SST-5 macro F ({entry['budget']}) | {name} | {summary(system['per_seed'])} | {gaps} |")
    return "\n".join(rows)


def chart(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    domains = list(result["domains"].items())
    fig, axes = plt.subplots(1, len(domains), figsize=(4.2 * len(domains), 3.6))
    for ax, (domain, entry) in zip(list(axes) if len(domains) > 1 else [axes], domains):
        names = [n for n in ("tok2vec", "unadapted", "unadapted, another run", "unadapted, re-run here", "adapted") if n in entry["scores"]]
        for x, name in enumerate(names):
            values = entry["scores"][name]["per_seed"]
            if values:
                ax.bar(x, statistics.mean(values), color="tab:green" if name == "adapted" else "tab:gray", alpha=0.6)
                ax.plot([x] * len(values), values, "ko", markersize=3)
        ax.set_xticks(range(len(names)), [n.replace(", ", ",\n") for n in names], fontsize=7)
        ax.set_title(f"{entry['metric']}\n({TEXT[domain]})", fontsize=9)
        ax.set_ylim(0, None)  # as the project's compare charts: a gap's size is what it looks
    fig.suptitle("ELMo adapted to each task's text vs unadapted and tok2vec, seeds 0, 1, 2 (dots)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    result = collect(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "")
    (OUT / "adapt.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(tables(result))
    chart(result, OUT / "adapt.png")


if __name__ == "__main__":
    main()
