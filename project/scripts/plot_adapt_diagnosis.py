"""One chart of an adaptation's diagnosis, against its updates: how far each layer's vectors moved
(layer_drift.py), perplexity (held-out domain text, WikiText-2: adapt_curve.py and the snapshot
run's metrics.jsonl), and the task (the component's test score per seed, adapt_curve.py; the
linear probes, layer_probe.py).

python scripts/plot_adapt_diagnosis.py OUTPUT.png --drift DRIFT.json --curve CURVE.json
    --probe PROBE.json --metrics RUN/metrics.jsonl [--before 115.7] [--null-scores 22.6,20.8,...]

Labels that are numbers are the updates of the whole biLM; the others (controls) are left out.
--before: the held-out perplexity at update 0 (adapt's summary.json "ppl_before": the source with
the fitted softmax), which the whole-biLM run's metrics.jsonl does not hold.
--null-scores: component scores of biLMs that differ from the source by next to nothing, drawn as
a band (their range) at update 0.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def numeric(rows: List[Dict]) -> List[Tuple[float, Dict]]:
    points = [(float(r["label"]), r) for r in rows if r["label"].replace(".", "", 1).isdigit()]
    return sorted(points, key=lambda p: p[0])


def plot_drift(ax: plt.Axes, drift: Dict) -> None:
    """Per layer, the mean cosine to the source's vectors (1 at update 0)."""
    points = [(0.0, None)] + numeric(drift["bilms"])
    for layer in drift["bilms"][0]["layers"]:
        means = [1.0 if r is None else r["layers"][layer]["mean"] for _, r in points]
        ax.plot([x for x, _ in points], means, "o-", label=layer)
    ax.set(
        xlabel="updates of the whole biLM",
        ylabel="mean cosine to the source's vector",
        title="How far each layer moved (test text)",
    )
    ax.legend(fontsize=8)


def plot_perplexity(ax: plt.Axes, metrics: Path, before: Optional[float], curve: Dict) -> None:
    """The held-out domain perplexity (adapt's stop) and WikiText-2's (forgetting)."""
    evaluations = [json.loads(line) for line in metrics.read_text().splitlines()]
    held_out = [(r["step"], r["dev_ppl"]) for r in evaluations if "dev_ppl" in r]
    if before is not None:
        held_out.insert(0, (0, before))
    curve_points = numeric(curve["rows"])
    ax.plot(*zip(*held_out), "o-", label="held-out domain text (adapt's stop)")
    wikitext = [r["wikitext2_ppl"] for _, r in curve_points]
    ax.plot([x for x, _ in curve_points], wikitext, "s--", label="WikiText-2 valid (forgetting)")
    ax.set(xlabel="updates of the whole biLM", ylabel="perplexity", title="Perplexity")
    ax.legend(fontsize=8)


def plot_task(ax: plt.Axes, curve: Dict, probe: Dict, null_scores: Optional[str]) -> None:
    """The component's test score per seed, the null band, and the linear probes."""
    curve_points = numeric(curve["rows"])
    for seed in sorted({run["seed"] for _, r in curve_points for run in r["runs"]}):
        xy = [(x, run["score"]) for x, r in curve_points for run in r["runs"] if run["seed"] == seed]
        ax.plot(*zip(*xy), "o-", label=f"component, seed {seed}")
    if null_scores:
        nulls = [float(v) for v in null_scores.split(",")]
        ax.axhspan(min(nulls), max(nulls), color="grey", alpha=0.2, label="unadapted, nudged by noise")
    probe_points = numeric(probe["bilms"])
    for layer in ("lstm1", "lstm2", "mean"):
        scores = [r["scores"][layer] for _, r in probe_points]
        ax.plot([x for x, _ in probe_points], scores, "^:", label=f"linear probe, {layer}")
    ax.set(xlabel="updates of the whole biLM", ylabel=f"test {curve['metric']} (x100)", title="The task")
    ax.legend(fontsize=7)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--drift", type=Path, required=True)
    parser.add_argument("--curve", type=Path, required=True)
    parser.add_argument("--probe", type=Path, required=True)
    parser.add_argument("--metrics", type=Path, required=True)
    parser.add_argument("--before", type=float, help="held-out perplexity at update 0")
    parser.add_argument("--null-scores", help="comma-separated component scores of next-to-unchanged biLMs")
    args = parser.parse_args()
    drift, curve, probe = (json.loads(p.read_text()) for p in (args.drift, args.curve, args.probe))
    fig, (moved, ppl, task) = plt.subplots(1, 3, figsize=(15, 4))
    plot_drift(moved, drift)
    plot_perplexity(ppl, args.metrics, args.before, curve)
    plot_task(task, curve, probe, args.null_scores)
    for ax in (moved, ppl, task):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.output, dpi=90)
    print(f"Wrote {args.output}")


if __name__ == "__main__":
    main()
