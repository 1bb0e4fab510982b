"""One chart of an adaptation's diagnosis, against its updates: how far each layer's vectors moved
(layer_drift.py), perplexity (held-out domain text, WikiText-2: adapt_curve.py and the snapshot
run's metrics.jsonl), and the task (the component's test score per seed, adapt_curve.py; the
linear probes, layer_probe.py).

python scripts/plot_adapt_diagnosis.py OUTPUT.png --drift DRIFT.json --curve CURVE.json
    --probe PROBE.json --metrics RUN/metrics.jsonl [--null-scores 22.6,20.8,...]

Labels that are numbers are the updates of the whole biLM; the others (controls) are left out.
--null-scores: component scores of biLMs that differ from the source by next to nothing, drawn as
a band (their range) at update 0.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Dict, List, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def numeric(rows: List[Dict]) -> List[Tuple[float, Dict]]:
    points = [(float(r["label"]), r) for r in rows if r["label"].replace(".", "", 1).isdigit()]
    return sorted(points, key=lambda p: p[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--drift", type=Path, required=True)
    parser.add_argument("--curve", type=Path, required=True)
    parser.add_argument("--probe", type=Path, required=True)
    parser.add_argument("--metrics", type=Path, required=True)
    parser.add_argument("--null-scores", help="comma-separated component scores of next-to-unchanged biLMs")
    args = parser.parse_args()
    drift, curve, probe = (json.loads(p.read_text()) for p in (args.drift, args.curve, args.probe))
    fig, (moved, ppl, task) = plt.subplots(1, 3, figsize=(15, 4))

    points = [(0.0, None)] + numeric(drift["bilms"])
    for layer in drift["bilms"][0]["layers"]:
        moved.plot(
            [x for x, _ in points],
            [1.0 if r is None else r["layers"][layer]["mean"] for x, r in points],
            "o-",
            label=layer,
        )
    moved.set(
        xlabel="updates of the whole biLM",
        ylabel="mean cosine to the source's vector",
        title="How far each layer moved (test text)",
    )
    moved.legend(fontsize=8)

    evaluations = [json.loads(line) for line in args.metrics.read_text().splitlines()]
    held_out = [(r["step"], r["dev_ppl"]) for r in evaluations if "dev_ppl" in r]
    curve_points = numeric(curve["rows"])
    ppl.plot(*zip(*held_out), "o-", label="held-out domain text (adapt's stop)")
    ppl.plot(
        [x for x, _ in curve_points],
        [r["wikitext2_ppl"] for _, r in curve_points],
        "s--",
        label="WikiText-2 valid (forgetting)",
    )
    ppl.set(xlabel="updates of the whole biLM", ylabel="perplexity", title="Perplexity")
    ppl.legend(fontsize=8)

    seeds = sorted({run["seed"] for _, r in curve_points for run in r["runs"]})
    for seed in seeds:
        xy = [(x, run["score"]) for x, r in curve_points for run in r["runs"] if run["seed"] == seed]
        task.plot(*zip(*xy), "o-", label=f"component, seed {seed}")
    if args.null_scores:
        nulls = [float(v) for v in args.null_scores.split(",")]
        task.axhspan(min(nulls), max(nulls), color="grey", alpha=0.2, label="unadapted, nudged by noise")
    probe_points = numeric(probe["bilms"])
    for layer in ("lstm1", "lstm2", "mean"):
        task.plot(
            [x for x, _ in probe_points],
            [r["scores"][layer] for _, r in probe_points],
            "^:",
            label=f"linear probe, {layer}",
        )
    task.set(xlabel="updates of the whole biLM", ylabel=f"test {curve['metric']} (x100)", title="The task")
    task.legend(fontsize=7)
    for ax in (moved, ppl, task):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"Wrote {args.output}")


if __name__ == "__main__":
    main()
