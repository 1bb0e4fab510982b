"""What ``pretrain --resume`` continues: the run as it was started, read from its own config.cfg,
changed only where a resume may change it (the manual's "Checkpoints and --resume").

The first run's paths and overrides are in the config.cfg it wrote, not in the config file it was
started from, so a resume starts from that config.cfg; ``check_resumed_config`` is the one check
of what a resumed config changes, for the command and for ``pretrain(config, resume=True)``.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from confection import Config

from .config import ConfigError, default_config, flatten
from .run_files import CONFIG_NAME

#: Config keys a ``--resume`` may change: how long it runs, how often it logs, evaluates and
#: saves, what it evaluates on, how its step runs and its thread count.
RESUMABLE_CHANGES = (
    "corpus.dev",
    "corpus.dev_max_tokens",
    "paths.dev",
    "system.threads",
    "training.checkpoint_every",
    "training.directions_on_streams",
    "training.distinct_tokens",
    "training.eval_every",
    "training.fused_cell",
    "training.log_every",
    "training.lstm_wavefront",
    "training.max_steps",
    "training.patience",
    "training.step",
)


def resumed_config(output_dir: Path, overrides: Dict[str, Any]) -> Tuple[Config, List[str]]:
    """The config of the run in ``output_dir`` (its config.cfg, interpolated) with ``overrides``
    applied, and one ``key: old -> new`` line per change (``check_resumed_config``). An override
    that repeats the run's value is accepted (the first run's command with ``--resume`` added)."""
    saved_file = Path(output_dir) / CONFIG_NAME
    if not saved_file.is_file():
        raise FileNotFoundError(
            f"--resume: {saved_file} not found: {output_dir} holds no pretraining run to continue"
        )
    config = Config().from_disk(saved_file, interpolate=False)
    saved, defaults = flatten(config), flatten(default_config())
    for key, value in overrides.items():
        section, _, name = key.partition(".")
        if section not in config or (key not in saved and key not in RESUMABLE_CHANGES):
            raise ConfigError(f"override {key!r} does not name a key of {saved_file}")
        config[section][name] = value
        for follower in (k for k, v in defaults.items() if v == "${" + key + "}"):
            # e.g. corpus.dev = ${paths.dev}, which config.cfg holds interpolated
            f_section, _, f_name = follower.partition(".")
            if saved.get(follower) == saved.get(key) and f_section in config:
                config[f_section][f_name] = value
    return config.interpolate(), check_resumed_config(output_dir, config)


def check_resumed_config(output_dir: Path, config: Config) -> List[str]:
    """One ``key: old -> new`` line per key ``config`` changes from the run's ``config.cfg`` (none
    when it has none); a change of a key not in ``RESUMABLE_CHANGES`` is refused, naming it."""
    saved_file = Path(output_dir) / CONFIG_NAME
    if not saved_file.is_file():
        return []
    saved = flatten(Config().from_disk(saved_file, interpolate=False))
    changes, refused = [], []
    for key, value in flatten(config).items():
        if key in RESUMABLE_CHANGES and saved.get(key) != value:
            changes.append(f"{key}: {saved.get(key)!r} -> {value!r}")
        elif key in saved and saved[key] != value and key not in RESUMABLE_CHANGES:
            refused.append(f"{key}: {saved[key]!r} -> {value!r}")
    if refused:
        raise ConfigError(
            f"--resume continues the run as {saved_file} records it; it may change only "
            f"{', '.join(RESUMABLE_CHANGES)}, not " + "; ".join(refused)
            + f". To train on with other settings, start a new run from this one: "
            f"--paths.init_bilm {output_dir}"
        )
    return changes


def resume_command(output_dir: Path, gpu_id: int = -1, world_size: Optional[int] = None) -> str:
    """The command that continues the run in ``output_dir`` as it was started (from its own
    config.cfg), for the shell it was started from; under torchrun, with the same number of
    processes (a checkpoint resumes on that number only)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1")) if world_size is None else world_size
    launcher = (
        f"torchrun --nproc-per-node {world_size} -m spacy_elmo"
        if world_size > 1
        else "python -m spacy_elmo"
    )
    out = str(output_dir)
    gpu = f" --gpu-id {gpu_id}" if gpu_id >= 0 else ""
    return f"{launcher} pretrain {shlex.quote(os.path.join(out, CONFIG_NAME))} {shlex.quote(out)} --resume{gpu}"
