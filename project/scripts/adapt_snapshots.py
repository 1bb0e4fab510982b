"""Re-run an adaptation's whole-biLM step and keep a copy of the biLM at every checkpoint, for
curves along the adaptation (`adapt` keeps only its best evaluation's weights).

python scripts/adapt_snapshots.py ADAPT_OUTPUT OUTPUT [--max-steps N] [--every K]

ADAPT_OUTPUT: an `adapt` output directory; its config.cfg (the whole-biLM step: the same start,
text, seed and schedule) is run again into OUTPUT/run with held-out early stopping off, so the
run goes on to --max-steps (default: the config's; the learning rate still falls linearly to 0
there, as in `adapt`), and each checkpoint's options.json and model.safetensors are copied to
OUTPUT/step-N (N a multiple of --every, default the config's checkpoint_every). On one thread
and the same seed the evaluations before adapt's stop repeat adapt's own (its metrics.jsonl).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from spacy_elmo.pretrain import trainer
from spacy_elmo.pretrain.config import load_config
from spacy_elmo.pretrain.run_files import CONFIG_NAME, OPTIONS_NAME, SAFETENSORS_NAME


def keep_every_checkpoint(output: Path) -> None:
    """Make each checkpoint that writes the model files also copy them to ``output/step-N``."""
    save = trainer.Trainer.save_checkpoint

    def save_and_copy(self: trainer.Trainer, model_files: bool = True) -> None:
        save(self, model_files)
        if model_files and self.step % self.settings.training.checkpoint_every == 0:
            kept = output / f"step-{self.step}"
            kept.mkdir(parents=True, exist_ok=True)
            for name in (OPTIONS_NAME, SAFETENSORS_NAME):
                shutil.copyfile(self.output_dir / name, kept / name)

    trainer.Trainer.save_checkpoint = save_and_copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("adapt_output", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--every", type=int)
    args = parser.parse_args()
    overrides = {"training.patience": None}
    if args.max_steps is not None:
        overrides["training.max_steps"] = args.max_steps
    if args.every is not None:
        overrides["training.checkpoint_every"] = args.every
    config = load_config(args.adapt_output / CONFIG_NAME, overrides)
    keep_every_checkpoint(args.output)
    trainer.pretrain(config, args.output / "run")


if __name__ == "__main__":
    main()
