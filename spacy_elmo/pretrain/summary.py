"""The lines a finished pretraining run ends with: what it did, how good the model is on held-out
text, where it is, and the commands that use it (each works pasted as printed).

Read from the run's metrics.jsonl, so that a resumed run reports its whole run (steps, tokens and
time since the start).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Dict, List, Optional

from .metrics import read_metrics


def format_duration(seconds: float) -> str:
    """12.3 -> "12 s"; 754 -> "12 min 34 s"; 7384 -> "2 h 3 min"."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def last_held_out(output_dir: Path) -> Optional[Dict]:
    """The run's latest evaluation record (``dev_ppl`` ...), None if it never evaluated."""
    evaluations = [r for r in read_metrics(output_dir) if "dev_ppl" in r]
    return evaluations[-1] if evaluations else None


def run_seconds(records: List[Dict]) -> float:
    """A run's time, every session's, as its latest record keeps it (0: none kept it)."""
    return max((r["seconds"] for r in records if "seconds" in r), default=0.0)


def run_summary(output_dir: Path) -> str:
    """What ``pretrain`` prints at the end of a run that reached ``max_steps``: its steps,
    tokens and time, every session's."""
    records = read_metrics(output_dir)
    training = [r for r in records if "loss" in r]
    last = training[-1] if training else {"step": 0, "tokens": 0}
    seconds = run_seconds(records)
    held_out = last_held_out(output_dir)
    out = shlex.quote(str(output_dir))
    ppl = (
        f"held-out perplexity {held_out['dev_ppl']:.2f} (forward {held_out['dev_ppl_forward']:.2f}, "
        f"backward {held_out['dev_ppl_backward']:.2f}; {held_out['dev_tokens']:,} tokens, step "
        f"{held_out['step']})"
        if held_out
        else "no held-out text (--paths.dev DEV.txt measures it; or python -m spacy_elmo "
        f"evaluate-lm {out} DEV.txt now)"
    )
    weights = json.dumps(str(output_dir))
    return "\n".join(
        [
            f"Pretraining done: {last['step']:,} steps, {last['tokens']:,} tokens, "
            f"{format_duration(seconds)}; {ppl}.",
            f"Model: {output_dir} (options.json + model.safetensors; softmax and vocab for more "
            "pretraining)",
            "Use it:",
            f"  python -m spacy_elmo demo --weights {out}",
            f"  python -m spacy_elmo config train.cfg --pipeline tagger --weights {out} --train "
            "TRAIN.spacy --dev DEV.spacy",
            f"  nlp.add_pipe(\"elmo\", config={{\"model\": {{\"@architectures\": "
            f"\"spacy_elmo.ElmoModel.v2\", \"weights\": {weights}}}}})",
        ]
    )
