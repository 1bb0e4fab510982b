"""What ``pretrain --resume`` continues: the run as it was started, read from its own config.cfg.

The first run's paths and overrides (``--paths.train corpus.txt --training.max_steps 400``) are in
the config.cfg it wrote, not in the config file it was started from: resuming from that file
alone lost them (a missing training corpus, or silently the recipe's own ``max_steps``). A resume
therefore starts from the run's config.cfg; the command line may change only what
``RESUMABLE_CHANGES`` lists (how long it runs, how often it logs and saves, what it evaluates
on), and each change is named. ``resume_command`` is the line a stopped run prints.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from confection import Config

from .checkpoint import RESUMABLE_CHANGES, flatten
from .config import ConfigError, default_config
from .run_files import CONFIG_NAME


def resumed_config(output_dir: Path, overrides: Dict[str, Any]) -> Tuple[Config, List[str]]:
    """The config of the run in ``output_dir`` (its config.cfg, interpolated), with the
    ``overrides`` that change a key a resume may change. Returns it and one ``key: old -> new``
    line per change. An override of another key is refused unless it repeats the run's value
    (pasting the first run's command with ``--resume`` added works)."""
    saved_file = Path(output_dir) / CONFIG_NAME
    if not saved_file.is_file():
        raise FileNotFoundError(
            f"--resume: {saved_file} not found: {output_dir} holds no pretraining run to continue"
        )
    config = Config().from_disk(saved_file, interpolate=False)
    saved = flatten(config)
    changes, refused = [], []
    for key, value in overrides.items():
        section, _, name = key.partition(".")
        if section not in config or (key not in saved and key not in RESUMABLE_CHANGES):
            raise ConfigError(f"override {key!r} does not name a key of {saved_file}")
        if saved.get(key) == value:
            continue
        if key not in RESUMABLE_CHANGES:
            refused.append(f"--{key} {value!r} (the run has {saved.get(key)!r})")
            continue
        changes.append(f"{key}: {saved.get(key)!r} -> {value!r}")
        config[section][name] = value
        for follower in _references(key):  # e.g. corpus.dev = ${paths.dev}, saved interpolated
            f_section, _, f_name = follower.partition(".")
            if saved.get(follower) == saved.get(key) and f_section in config:
                config[f_section][f_name] = value
    if refused:
        raise ConfigError(
            f"--resume continues the run as {saved_file} records it; it may change only "
            f"{', '.join(RESUMABLE_CHANGES)}, not " + "; ".join(refused)
            + f". To train on with other settings, start a new run from this one: "
            f"--paths.init_bilm {output_dir}"
        )
    return config.interpolate(), changes


def _references(key: str) -> List[str]:
    """Keys of the default config whose value is ``${key}``."""
    reference = "${" + key + "}"
    return [k for k, v in flatten(default_config()).items() if v == reference]


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
