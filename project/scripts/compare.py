"""``python scripts/compare.py``: downstream results of ELMo and baseline systems, side by side.

Each system is a directory of metrics, as this project's steps write them:

- ``TASK.json`` for TASK in ``tagger``, ``ner``, ``textcat``, ``parser``: the output of
  ``python -m spacy evaluate`` (``tag_acc``, ``ents_f``, ``cats_micro_f``, ``dep_las`` ...,
  ``speed``), scores as fractions;
- ``TASK_train.json`` (optional): ``{"seconds": ..., "evaluations": [{"epoch", "step",
  "seconds"}]}``, the wall-clock time of ``spacy train`` and of its evaluations
  (``project/scripts/timed.py``).

The tables have the columns of the tasks some system has. A missing file leaves its cells empty
("-"), so a system trained for one task only still shows. The textcat's accuracy is spaCy's
``cats_micro_f``: with exclusive classes every doc has one predicted and one gold label, so
micro-averaged precision, recall and F all equal the accuracy. When the timings have the
evaluations, the seeds table also gives the time per 100 steps after the first epoch (from the
first evaluation in epoch 2 to the last one): where a frozen biLM's layers come from its cache.
A system may name several directories, one per training seed (``LABEL=DIR,DIR,DIR``): the table
then gives each seed's score, the mean and the standard deviation, and says whether a system is
ahead of the reference at every seed (paired by position) and by more than either spread.
The output is a Markdown table and, with matplotlib, a chart of the scores (means with the
standard deviation as error bars and a dot per seed) and training times.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import srsly
import typer

from spacy_elmo.cli.errors import fail, failing
from spacy_elmo.cli.help import prepare_help
from spacy_elmo.cli.plots import pyplot, save_figure

TASKS = ("tagger", "ner", "textcat", "parser")
TASK_NAMES = {"tagger": "tagger", "ner": "NER", "textcat": "textcat", "parser": "parser"}

#: (column title, task, key in the ``spacy evaluate`` JSON): the score columns of the table.
SCORE_COLUMNS = (
    ("tagger accuracy", "tagger", "tag_acc"),
    ("NER F1", "ner", "ents_f"),
    ("NER precision", "ner", "ents_p"),
    ("NER recall", "ner", "ents_r"),
    ("textcat accuracy", "textcat", "cats_micro_f"),
    ("textcat macro F", "textcat", "cats_macro_f"),
    ("parser LAS", "parser", "dep_las"),
    ("parser UAS", "parser", "dep_uas"),
)
#: The scores of the seeds table, the differences and the chart: each task's measure (for the
#: tagger and the NER, as the earlier tables had them) and, for the textcat and the parser, the
#: second one that their benchmarks report (macro F, UAS).
HEADLINE_COLUMNS = tuple(
    column
    for column in SCORE_COLUMNS
    if column[0] in ("tagger accuracy", "NER F1", "textcat accuracy", "textcat macro F", "parser LAS", "parser UAS")
)


@dataclass
class SystemMetrics:
    """One system's test scores (``spacy evaluate`` JSON per task) and training times."""

    name: str
    scores: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    train_seconds: Dict[str, float] = field(default_factory=dict)
    #: task -> seconds per 100 training steps after the first epoch, evaluations included.
    later_epochs_seconds: Dict[str, float] = field(default_factory=dict)

    def score(self, task: str, key: str) -> Optional[float]:
        value = self.scores.get(task, {}).get(key)
        return None if value is None else float(value)


@dataclass
class SystemRuns:
    """One system trained several times (one :class:`SystemMetrics` per seed)."""

    name: str
    runs: List[SystemMetrics]

    def scores(self, task: str, key: str) -> List[float]:
        """The runs' scores that exist, in run order."""
        values = [run.score(task, key) for run in self.runs]
        return [v for v in values if v is not None]

    def mean_train_seconds(self, task: str) -> Optional[float]:
        values = [run.train_seconds[task] for run in self.runs if task in run.train_seconds]
        return statistics.fmean(values) if values else None

    def later_epochs_seconds(self, task: str) -> List[float]:
        """Each run's seconds per 100 steps after the first epoch, where measured."""
        return [run.later_epochs_seconds[task] for run in self.runs if task in run.later_epochs_seconds]


def read_system(name: str, directory: Path) -> SystemMetrics:
    """Read a system's metrics directory (see the module docstring)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"compare: the metrics directory of '{name}', {directory}, does not exist")
    system = SystemMetrics(name)
    for task in TASKS:
        scores = directory / f"{task}.json"
        if scores.exists():
            system.scores[task] = srsly.read_json(scores)
        timing = directory / f"{task}_train.json"
        if timing.exists():
            timing_data = srsly.read_json(timing)
            system.train_seconds[task] = float(timing_data["seconds"])
            later = later_epochs_seconds(timing_data.get("evaluations", []))
            if later is not None:
                system.later_epochs_seconds[task] = later
    if not system.scores:
        names = ", ".join(f"{task}.json" for task in TASKS)
        raise ValueError(
            f"compare: {directory} ('{name}') holds none of {names} "
            "(the output of python -m spacy evaluate)"
        )
    return system


def later_epochs_seconds(evaluations: List[Dict[str, Any]]) -> Optional[float]:
    """Seconds per 100 training steps after the first epoch: from the first evaluation in a
    later epoch to the last evaluation (the stretch where a frozen biLM's layers come from its
    cache; the evaluations in it are counted too). None without two such evaluations."""
    later = [e for e in evaluations if e["epoch"] >= 1]
    if len(later) < 2 or later[-1]["step"] <= later[0]["step"]:
        return None
    return 100 * (later[-1]["seconds"] - later[0]["seconds"]) / (later[-1]["step"] - later[0]["step"])


def present_tasks(systems: Sequence[SystemMetrics]) -> List[str]:
    """The tasks, in TASKS order, that some system has scores for."""
    return [task for task in TASKS if any(task in system.scores for system in systems)]


def comparison_table(systems: Sequence[SystemMetrics], title: Optional[str] = None) -> str:
    """A Markdown table: one row per system, scores in percent, training times, and the
    difference of every other system to the last one (the reference, e.g. the baseline)."""
    tasks = present_tasks(systems)
    columns = [column for column in SCORE_COLUMNS if column[1] in tasks]
    header = [
        "system",
        *(title for title, _, _ in columns),
        *(f"{TASK_NAMES[task]} training" for task in tasks),
        *(f"{TASK_NAMES[task]} words/s" for task in tasks),
    ]
    rows = []
    for system in systems:
        cells = [system.name]
        cells += [_percent(system.score(task, key)) for _, task, key in columns]
        cells += [_duration(system.train_seconds.get(task)) for task in tasks]
        cells += [_count(system.score(task, "speed")) for task in tasks]
        rows.append(cells)
    return _report(title, header, rows, systems, _score_deltas)


def _score_deltas(system: SystemMetrics, reference: SystemMetrics) -> List[str]:
    """``system``'s headline scores minus ``reference``'s, in points, as one line (none without any)."""
    deltas = []
    for title, task, key in HEADLINE_COLUMNS:
        a, b = system.score(task, key), reference.score(task, key)
        if a is not None and b is not None:
            deltas.append(f"{title} {100 * (a - b):+.2f}")
    return [f"- {system.name} vs {reference.name}: {', '.join(deltas)} points"] if deltas else []


def seeds_table(systems: Sequence[SystemRuns], title: Optional[str] = None) -> str:
    """A Markdown table of systems trained over several seeds: per seed, mean and standard
    deviation of each task's scores (tagger accuracy, NER F1, textcat accuracy and macro F,
    parser LAS and UAS), then each system against the last one (the reference): the difference of the means, the
    per-seed differences (runs paired by position) and whether the gap exceeds each system's
    standard deviation and range. With the evaluations' timings, also the time per 100 steps after
    the first epoch and its ratio to the reference's."""
    tasks = present_tasks([run for system in systems for run in system.runs])
    columns = [column for column in HEADLINE_COLUMNS if column[1] in tasks]
    later_tasks = [task for task in tasks if any(system.later_epochs_seconds(task) for system in systems)]
    header = ["system", "seeds"]
    for column, _, _ in columns:
        header += [f"{column}, per seed", f"{column}, mean (sd)"]
    header += [f"{TASK_NAMES[task]} training (mean)" for task in tasks]
    header += [f"{TASK_NAMES[task]} s / 100 steps after epoch 1 (mean)" for task in later_tasks]
    rows = []
    for system in systems:
        cells = [system.name, str(len(system.runs))]
        for _, task, key in columns:
            values = system.scores(task, key)
            cells.append(", ".join(_percent(v) for v in values) or "-")
            cells.append(_mean_sd(values))
        cells += [_duration(system.mean_train_seconds(task)) for task in tasks]
        for task in later_tasks:
            values = system.later_epochs_seconds(task)
            cells.append(f"{statistics.fmean(values):.1f}" if values else "-")
        rows.append(cells)

    def gaps(system: SystemRuns, reference: SystemRuns) -> List[str]:
        lines = []
        for column, task, key in columns:
            ours, theirs = system.scores(task, key), reference.scores(task, key)
            if ours and theirs:
                lines.append(f"- {system.name} vs {reference.name}, {column}: {_gap(ours, theirs)}")
        for task in later_tasks:
            ours, theirs = system.later_epochs_seconds(task), reference.later_epochs_seconds(task)
            if ours and theirs and len(ours) == len(theirs):
                ratios = [a / b for a, b in zip(ours, theirs)]
                lines.append(
                    f"- {system.name} vs {reference.name}, {TASK_NAMES[task]} training time after "
                    f"the first epoch: {statistics.fmean(ratios):.2f}x (per seed "
                    f"{', '.join(f'{r:.2f}x' for r in ratios)})"
                )
        return lines

    return _report(title, header, rows, systems, gaps)


def _report(
    title: Optional[str], header: List[str], rows: List[List[str]], systems: Sequence, against: Callable[..., List[str]]
) -> str:
    """An optional ``## title``, a Markdown table, then ``against(system, reference)``'s lines for
    every system but the last, the reference."""
    lines = [f"## {title}", ""] if title else []
    lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    if len(systems) > 1:
        lines += ["", *(line for system in systems[:-1] for line in against(system, systems[-1]))]
    return "\n".join(lines) + "\n"


def _gap(ours: List[float], theirs: List[float]) -> str:
    """The difference of the means in points, per seed when paired, and against the spreads."""
    gap = 100 * (statistics.fmean(ours) - statistics.fmean(theirs))
    text = f"{gap:+.2f} points on average"
    if len(ours) == len(theirs):
        paired = [100 * (a - b) for a, b in zip(ours, theirs)]
        ahead = sum(d > 0 for d in paired)
        text += f" (per seed {', '.join(f'{d:+.2f}' for d in paired)}; ahead at {ahead} of {len(paired)})"
    if len(ours) > 1 and len(theirs) > 1:
        sd = 100 * max(statistics.stdev(ours), statistics.stdev(theirs))
        spread = 100 * max(max(ours) - min(ours), max(theirs) - min(theirs))
        text += (
            f"; {'more' if abs(gap) > sd else 'less'} than the larger standard deviation ({sd:.2f}), "
            f"{'more' if abs(gap) > spread else 'less'} than the larger range ({spread:.2f})"
        )
    return text


def plot_comparison(
    systems: Sequence[SystemRuns], output_png: Path, title: Optional[str] = None
) -> Path:
    """The chart of ``comparison_figure``, written to ``output_png``."""
    return save_figure(comparison_figure(systems, title), output_png, dpi=100)


def comparison_figure(systems: Sequence[SystemRuns], title: Optional[str] = None):
    """One panel per score (a point per system at the mean over its runs, the standard deviation
    as error bar, a dot per seed) and one of training times (a bar per system and task)."""
    plt = pyplot("compare --plot")

    tasks = present_tasks([run for system in systems for run in system.runs])
    score_groups = [
        (title, [[100 * v for v in system.scores(task, key)] for system in systems])
        for title, task, key in HEADLINE_COLUMNS
        if task in tasks
    ]
    seconds = {task: [system.mean_train_seconds(task) or 0.0 for system in systems] for task in tasks}
    longest = max(max(values) for values in seconds.values())
    unit, factor = ("min", 1 / 60) if longest >= 300 else ("s", 1.0)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(1, len(score_groups) + 1, figsize=(12, 4))
    # Scores: a point per system at the mean, the standard deviation as its error bar and a dot
    # per seed, on an axis from 0 to 100: fitted to the values, a 1-point gap at 94% looked like a
    # doubling. Small gaps are read from the means written beside the points (and the table).
    for ax, (column, per_system) in zip(axes, score_groups):
        for i, (system, values) in enumerate(zip(systems, per_system)):
            if not values:
                continue
            mean = statistics.fmean(values)
            error = statistics.stdev(values) if len(values) > 1 else None
            color = colors[i % len(colors)]
            ax.errorbar(i, mean, yerr=error, fmt="o", color=color, capsize=4, label=system.name)
            if len(values) > 1:
                ax.plot([i + 0.15] * len(values), values, ".", color=color, alpha=0.6, markersize=5)
            ax.annotate(
                f"{mean:.2f}", (i, mean), xytext=(-8, 0), textcoords="offset points",
                ha="right", va="center", fontsize=8,
            )
        ax.set_xlim(-0.7, len(systems) - 0.3)
        ax.set_ylim(0, 100)
        ax.set_xticks([])
        ax.set_title(column, fontsize=10)
        ax.set_ylabel("test score (%)")
    ax = axes[-1]
    width = 0.8 / len(systems)
    for i in range(len(systems)):
        xs = [g + (i - (len(systems) - 1) / 2) * width for g in range(len(tasks))]
        values = [seconds[task][i] * factor for task in tasks]
        bars = ax.bar(xs, values, width, color=colors[i % len(colors)])
        for bar, value in zip(bars, values):
            if value:
                x = bar.get_x() + bar.get_width() / 2
                ax.annotate(f"{value:.1f}", (x, value), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(tasks)))
    ax.set_ylim(bottom=0)
    ax.set_xticklabels([f"{TASK_NAMES[task]} training" for task in tasks])
    several_seeds = any(len(system.runs) > 1 for system in systems)
    ax.set_ylabel(f"training time ({unit}" + (", mean over seeds)" if several_seeds else ")"))
    handles, labels = axes[0].get_legend_handles_labels()
    top = 0.93 if title else 1.0
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, top), ncol=len(systems))
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, top - 0.06))
    return fig


def compare_command(
    systems: List[str] = typer.Argument(
        ...,
        help="LABEL=METRICS_DIR for each system, or LABEL=DIR,DIR,... with one directory per "
        "seed; differences are against the last one",
    ),
    output: Path = typer.Option(..., "--output", "-o", help="Markdown file to write"),
    plot: Optional[Path] = typer.Option(
        None, "--plot", help="Chart PNG to write (needs matplotlib)"
    ),
    title: Optional[str] = typer.Option(None, "--title", help="Heading, e.g. the test sets"),
) -> None:
    """Compare systems' test scores and training times: a Markdown table and a chart."""
    results = []
    for item in systems:
        name, sep, directories = item.rpartition("=")
        if not sep or not name or not all(directories.split(",")):
            raise typer.BadParameter(f"expected LABEL=METRICS_DIR or LABEL=DIR,DIR,..., got {item!r}")
        if any(system.name == name for system in results):
            fail(f"the label {name!r} is given twice; each system needs its own")
        with failing(ValueError, FileNotFoundError):  # a missing or incomplete metrics folder
            runs = [read_system(name, Path(d)) for d in directories.split(",")]
        results.append(SystemRuns(name, runs))
    if all(len(system.runs) == 1 for system in results):
        table = comparison_table([system.runs[0] for system in results], title)
    else:
        table = seeds_table(results, title)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(table, encoding="utf-8")
    typer.echo(table)
    typer.echo(f"Wrote {output}")
    if plot is not None:
        try:
            typer.echo(f"Wrote {plot_comparison(results, plot, title)}")
        except ImportError as err:
            fail(f"{err} (the table {output} was written)")


def _percent(value: Optional[float]) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _mean_sd(values: List[float]) -> str:
    if not values:
        return "-"
    mean = f"{100 * statistics.fmean(values):.2f}"
    return f"{mean} ({100 * statistics.stdev(values):.2f})" if len(values) > 1 else mean


def _count(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


app = typer.Typer(add_completion=False)
app.command()(compare_command)
prepare_help(app)

if __name__ == "__main__":
    app()
