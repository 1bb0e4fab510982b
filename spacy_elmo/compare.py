"""``python -m spacy_elmo compare``: downstream results of ELMo and baseline systems, side by side.

Each system is a directory of metrics, as the spaCy project (``project/``) writes them:

- ``tagger.json``, ``ner.json``: the output of ``python -m spacy evaluate`` (``tag_acc``,
  ``ents_f``, ``ents_p``, ``ents_r``, ``speed`` ...), scores as fractions;
- ``tagger_train.json``, ``ner_train.json`` (optional): ``{"seconds": ...}``, the wall-clock time of
  ``spacy train`` (``project/scripts/timed.py``).

A missing file leaves its cells empty ("-"), so a system trained for one task only still shows.
The output is a Markdown table and, with matplotlib, a bar chart of the scores and training times.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import typer

TASKS = ("tagger", "ner")
TASK_NAMES = {"tagger": "tagger", "ner": "NER"}

#: (column title, task, key in the ``spacy evaluate`` JSON): the score columns of the table.
SCORE_COLUMNS = (
    ("tagger accuracy", "tagger", "tag_acc"),
    ("NER F1", "ner", "ents_f"),
    ("NER precision", "ner", "ents_p"),
    ("NER recall", "ner", "ents_r"),
)


@dataclass
class SystemMetrics:
    """One system's test scores (``spacy evaluate`` JSON per task) and training times."""

    name: str
    scores: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    train_seconds: Dict[str, float] = field(default_factory=dict)

    def score(self, task: str, key: str) -> Optional[float]:
        value = self.scores.get(task, {}).get(key)
        return None if value is None else float(value)


def read_system(name: str, directory: Path) -> SystemMetrics:
    """Read a system's metrics directory (see the module docstring)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"compare: the metrics directory of '{name}', {directory}, does not exist")
    system = SystemMetrics(name)
    for task in TASKS:
        scores = directory / f"{task}.json"
        if scores.exists():
            system.scores[task] = json.loads(scores.read_text(encoding="utf-8"))
        timing = directory / f"{task}_train.json"
        if timing.exists():
            seconds = json.loads(timing.read_text(encoding="utf-8"))["seconds"]
            system.train_seconds[task] = float(seconds)
    if not system.scores:
        raise ValueError(
            f"compare: {directory} ('{name}') holds neither tagger.json nor ner.json "
            "(the output of python -m spacy evaluate)"
        )
    return system


def comparison_table(systems: Sequence[SystemMetrics], title: Optional[str] = None) -> str:
    """A Markdown table: one row per system, scores in percent, training times, and the
    difference of every other system to the last one (the reference, e.g. the baseline)."""
    header = [
        "system",
        *(title for title, _, _ in SCORE_COLUMNS),
        *(f"{TASK_NAMES[task]} training" for task in TASKS),
        *(f"{TASK_NAMES[task]} words/s" for task in TASKS),
    ]
    lines = [f"## {title}", ""] if title else []
    lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for system in systems:
        cells = [system.name]
        cells += [_percent(system.score(task, key)) for _, task, key in SCORE_COLUMNS]
        cells += [_duration(system.train_seconds.get(task)) for task in TASKS]
        cells += [_count(system.score(task, "speed")) for task in TASKS]
        lines.append("| " + " | ".join(cells) + " |")
    if len(systems) > 1:
        reference = systems[-1]
        lines.append("")
        for system in systems[:-1]:
            deltas = []
            for title, task, key in SCORE_COLUMNS[:2]:
                a, b = system.score(task, key), reference.score(task, key)
                if a is not None and b is not None:
                    deltas.append(f"{title} {100 * (a - b):+.2f}")
            if deltas:
                deltas_text = ", ".join(deltas)
                lines.append(f"- {system.name} vs {reference.name}: {deltas_text} points")
    return "\n".join(lines) + "\n"


def plot_comparison(
    systems: Sequence[SystemMetrics], output_png: Path, title: Optional[str] = None
) -> Path:
    """Bar chart: test scores (left) and training minutes (right), one bar per system and task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    score_groups = [
        (title, [_scaled(system.score(task, key), 100) for system in systems])
        for title, task, key in SCORE_COLUMNS[:2]
    ]
    longest = max((t for s in systems for t in s.train_seconds.values()), default=0.0)
    unit, factor = ("min", 1 / 60) if longest >= 300 else ("s", 1.0)
    time_groups = [
        (f"{TASK_NAMES[t]} training", [_scaled(s.train_seconds.get(t), factor) for s in systems])
        for t in TASKS
    ]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(systems)
    panels = (
        (axes[0], "test score (%)", score_groups),
        (axes[1], f"training time ({unit})", time_groups),
    )
    for ax, ylabel, groups in panels:
        for i, system in enumerate(systems):
            xs = [g + (i - (len(systems) - 1) / 2) * width for g in range(len(groups))]
            values = [per_system[i] for _, per_system in groups]
            bars = ax.bar(xs, [v or 0.0 for v in values], width, label=system.name)
            for bar, value in zip(bars, values):
                if value is not None:
                    x = bar.get_x() + bar.get_width() / 2
                    label = f"{value:.1f}"
                    ax.annotate(label, (x, bar.get_height()), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([title for title, _ in groups])
        ax.set_ylabel(ylabel)
    handles, labels = axes[0].get_legend_handles_labels()
    top = 0.93 if title else 1.0
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, top), ncol=len(systems))
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, top - 0.06))
    output_png = Path(output_png)
    output_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output_png, dpi=100)
    plt.close(fig)
    return output_png


def compare_command(
    systems: List[str] = typer.Argument(
        ..., help="LABEL=METRICS_DIR for each system; differences are against the last one"
    ),
    output: Path = typer.Option(..., "--output", "-o", help="Markdown file to write"),
    plot: Optional[Path] = typer.Option(
        None, "--plot", help="Bar chart PNG to write (needs matplotlib)"
    ),
    title: Optional[str] = typer.Option(None, "--title", help="Heading, e.g. the test sets"),
) -> None:
    """Compare systems' test scores and training times: a Markdown table and a bar chart."""
    results = []
    for item in systems:
        name, sep, directory = item.rpartition("=")
        if not sep or not name:
            raise typer.BadParameter(f"expected LABEL=METRICS_DIR, got {item!r}")
        results.append(read_system(name, Path(directory)))
    table = comparison_table(results, title)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(table, encoding="utf-8")
    typer.echo(table)
    typer.echo(f"Wrote {output}")
    if plot is not None:
        typer.echo(f"Wrote {plot_comparison(results, plot, title)}")


def _scaled(value: Optional[float], factor: float) -> Optional[float]:
    return None if value is None else value * factor


def _percent(value: Optional[float]) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _count(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"
