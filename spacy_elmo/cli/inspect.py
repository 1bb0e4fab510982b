"""What the downstream components of a trained pipeline learned about ELMo: each listener's layer
mix, which shows the layers a task uses (Peters et al. 2018, section 5.2); docs/guide/senses.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import List, Optional

import numpy as np
import typer
import wasabi

from ..files import write_json_atomically
from .errors import fail, failing
from .plots import pyplot, save_figure

#: The name Thinc gives a listener's mix head (``layers.mix_head``).
MIX_HEAD = "elmo-mix"


@dataclass
class ListenerMix:
    """One listener's learned mix: ``weights`` = softmax(s), token layer first; ``gamma``."""

    component: str
    weights: List[float]
    gamma: float
    layer_norm: bool

    @property
    def layer_names(self) -> List[str]:
        return layer_names(len(self.weights))


def layer_names(n_layers: int) -> List[str]:
    return ["token layer"] + [f"LSTM layer {k}" for k in range(1, n_layers)]


def listener_mixes(nlp) -> List[ListenerMix]:
    """The mixes of every ELMo-reading component (several listeners: ``name#1``, ...)."""
    mixes: List[ListenerMix] = []
    for name, pipe in nlp.pipeline:
        model = getattr(pipe, "model", None)
        if model is None or not hasattr(model, "walk"):
            continue
        heads = [node for node in model.walk() if node.name == MIX_HEAD and node.has_param("s")]
        for k, head in enumerate(heads, 1):
            s = np.asarray(head.ops.to_numpy(head.get_param("s")), dtype=np.float64)
            weights = np.exp(s - s.max())
            weights /= weights.sum()
            gamma = float(head.ops.to_numpy(head.get_param("gamma"))[0])
            label = name if len(heads) == 1 else f"{name}#{k}"
            mixes.append(ListenerMix(label, [float(w) for w in weights], gamma, bool(head.attrs["layer_norm"])))
    return mixes


def plot_listener_mixes(mixes: List[ListenerMix], output_png: Path, title: str) -> Path:
    """Grouped bars: one group per biLM layer, one bar per component (its weight of that layer)."""
    plt = pyplot("inspect --plot")

    n_layers = len(mixes[0].weights)
    positions = np.arange(n_layers)
    width = 0.8 / len(mixes)
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * n_layers, 3.6))
    for k, mix in enumerate(mixes):
        offsets = positions - 0.4 + width * (k + 0.5)
        ax.bar(offsets, mix.weights, width, label=f"{mix.component} (gamma {mix.gamma:.2f})")
    ax.axhline(1.0 / n_layers, color="grey", lw=0.8, ls="--", label="equal mix")
    ax.set_xticks(positions, layer_names(n_layers))
    ax.set(ylabel="learned weight softmax(s)", ylim=(0, 1), title=title)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, output_png)


def inspect_command(
    pipelines: List[Path] = typer.Argument(
        ..., help="Trained pipeline directories (spacy train's model-best, a packaged pipeline); several compare their components"
    ),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw the mixes to this PNG (needs matplotlib: the 'plot' extra)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the mixes to this JSON file"),
) -> None:
    """The layer mix each ELMo listener learned: which biLM layers the tagger, the NER and the
    other components chose (the paper's analysis), as a table, and with --plot as a chart.
    Several pipelines (a tagger's and an NER's model-best) share one table and chart."""
    found = [(pipeline, mix) for pipeline in pipelines for mix in _pipeline_mixes(pipeline)]
    mixes = [mix for _, mix in found]
    if len({len(m.weights) for m in mixes}) > 1:
        fail("the pipelines' biLMs have different numbers of layers: " + ", ".join(f"{m.component}: {len(m.weights)}" for m in mixes))
    labels = [m.component for m in mixes]
    if len(set(labels)) < len(labels):  # the same component name in two pipelines
        for pipeline, mix in found:
            mix.component = f"{mix.component} ({pipeline})"
    names = mixes[0].layer_names
    rows = [
        [m.component, *(f"{w:.3f}" for w in m.weights), f"{m.gamma:.3f}", "(layer norm)" if m.layer_norm else ""]
        for m in mixes
    ]
    typer.echo(wasabi.table(rows, header=["component", *names, "gamma", ""], aligns=["l", *"r" * len(names), "r", "l"]))
    typer.echo(f"\nweights = softmax(s): the share of each biLM layer in the component's ELMo vector; equal mix: {1 / len(names):.3f}")
    if output is not None:
        write_json_atomically(output, [asdict(m) for m in mixes])
        typer.echo(f"Wrote {output}")
    if plot is not None:
        where = pipelines[0].name if len(pipelines) == 1 else f"{len(pipelines)} pipelines"
        with failing(ImportError):
            written = plot_listener_mixes(mixes, plot, f"ELMo layer mix learned by each component ({where})")
        typer.echo(f"Wrote {written}")


def _pipeline_mixes(pipeline: Path) -> List[ListenerMix]:
    """The listener mixes of one pipeline directory, or a clear error naming it."""
    import spacy

    if not pipeline.is_dir():
        fail(f"pipeline directory not found: {pipeline}")
    try:
        nlp = spacy.load(pipeline)
    except (OSError, ValueError) as err:
        fail(f"cannot load the pipeline {pipeline}: {err}")
    mixes = listener_mixes(nlp)
    if not mixes:
        fail(f"{pipeline}: no component reads ELMo through a listener (spacy_elmo.ElmoListener.v1) with a trained mix")
    return mixes
