"""The learning curve of a pretraining run, from its ``metrics.jsonl``, as a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Union

from ..pretrain.metrics import read_metrics
from .plots import pyplot, save_figure


def plot_learning_curve(metrics_file: Union[str, Path], output_png: Union[str, Path]) -> Path:
    """Training loss per logged step and held-out perplexities (forward, backward, average)."""
    plt = pyplot("plotting a learning curve")

    if not Path(metrics_file).is_file():
        raise FileNotFoundError(f"metrics file not found: {metrics_file}")
    records = read_metrics(metrics_file)
    train = [r for r in records if "loss" in r]
    dev = [r for r in records if "dev_ppl" in r]
    if not train:
        raise ValueError(f"{metrics_file}: no training records to plot")
    fig, (ax_loss, ax_ppl) = plt.subplots(1, 2, figsize=(11, 4))
    ax_loss.plot([r["step"] for r in train], [r["loss"] for r in train], lw=1)
    softmax = train[-1].get("softmax")
    ylabel = f"training loss ({softmax} softmax)" if softmax else "training loss"
    ax_loss.set(xlabel="step", ylabel=ylabel, title="Training")
    if dev:
        steps = [r["step"] for r in dev]
        for key, label in (
            ("dev_ppl_forward", "forward"),
            ("dev_ppl_backward", "backward"),
            ("dev_ppl", "average"),
        ):
            ax_ppl.plot(steps, [r[key] for r in dev], marker="o", label=label)
        ax_ppl.set_yscale("log")
        ax_ppl.legend()
    ax_ppl.set(xlabel="step", ylabel="held-out perplexity (full softmax)", title="Held-out")
    for ax in (ax_loss, ax_ppl):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, output_png)
