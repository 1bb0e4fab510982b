"""What ``pretrain --resume`` continues: the run as it was started, read from its own config.cfg,
changed only where a resume may change it (docs/reference/pretraining-config.md, "Resuming").

The first run's paths and overrides are in the config.cfg it wrote, not in the config file it was
started from, so a resume starts from that config.cfg; ``resumed_changes`` is the one check of
what a resumed config changes, for the command and for ``pretrain(config, resume=True)``.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from confection import Config

from .config import ConfigError, config_with_overrides, flatten
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
    """The config of the run in ``output_dir``, read once from its config.cfg, with ``overrides``
    set by confection (``paths.dev`` reaches ``corpus.dev = ${paths.dev}``), its references kept
    for the resumed run's config.cfg; and one ``key: old -> new`` line per change. An override
    that repeats the run's value is accepted (the first run's command with ``--resume`` added)."""
    saved_file = Path(output_dir) / CONFIG_NAME
    if not saved_file.is_file():
        raise FileNotFoundError(
            f"--resume: {saved_file} not found: {output_dir} holds no pretraining run to continue"
        )
    text = saved_file.read_text(encoding="utf-8")
    saved = Config().from_str(text)
    before = flatten(saved)
    for key, value in overrides.items():
        if key not in before and key not in RESUMABLE_CHANGES:
            raise ConfigError(f"override {key!r} does not name a key of {saved_file}")
        unread = key.startswith("paths.") and "${" + key + "}" not in text
        if unread and key in RESUMABLE_CHANGES and value != before.get(key):
            raise ConfigError(  # a change that would change nothing
                f"--resume: no key of {saved_file} refers to ${{{key}}} (a run written by an earlier "
                "version records its paths written out): set the key that reads it, e.g. --corpus.dev"
            )
    config = config_with_overrides(text, overrides, str(saved_file))
    return config, resumed_changes(saved_file, saved, config)


def check_resumed_config(output_dir: Path, config: Config) -> List[str]:
    """``resumed_changes`` of ``config`` against the run's config.cfg (none when it has none)."""
    saved_file = Path(output_dir) / CONFIG_NAME
    if not saved_file.is_file():
        return []
    return resumed_changes(saved_file, Config().from_disk(saved_file), config)


def resumed_changes(saved_file: Path, saved: Config, config: Config) -> List[str]:
    """One ``key: old -> new`` line per key ``config`` changes from ``saved`` (the run's
    config.cfg, resolved), references resolved in both; a change of a key not in
    ``RESUMABLE_CHANGES`` is refused, naming it."""
    before = flatten(saved)
    changes, refused = [], []
    for key, value in flatten(config if config.is_interpolated else config.interpolate()).items():
        if key in RESUMABLE_CHANGES and before.get(key) != value:
            changes.append(f"{key}: {before.get(key)!r} -> {value!r}")
        elif key in before and before[key] != value and key not in RESUMABLE_CHANGES:
            refused.append(f"{key}: {before[key]!r} -> {value!r}")
    if refused:
        raise ConfigError(
            f"--resume continues the run as {saved_file} records it; it may change only "
            f"{', '.join(RESUMABLE_CHANGES)}, not " + "; ".join(refused)
            + f". To train on with other settings, start a new run from this one: "
            f"--paths.init_bilm {saved_file.parent}"
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
