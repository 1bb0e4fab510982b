"""How the benchmarks start the package's own commands as separate processes, under torchrun too.

``benchmarks embed`` and ``benchmarks gpu`` run ``python -m spacy_elmo ...`` as users do; both
need the same environment (this checkout's package importable, no torchrun variables of an outer
launcher) and the same view of a process tree (to sample or to stop torchrun's workers).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, List, Optional

#: The source checkout: it holds ``benchmarks/`` beside ``spacy_elmo/``, ``tests/`` and ``project/``.
CHECKOUT = Path(__file__).resolve().parents[1]
#: ``python -m torch.distributed.run`` on one machine: torchrun, as its console script runs it.
TORCHRUN = ("-m", "torch.distributed.run", "--standalone")
#: What torchrun sets in its workers; a bench started under torchrun must not pass them on.
RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def subprocess_env(threads: Optional[int] = None) -> Dict[str, str]:
    """This environment with the checkout first on PYTHONPATH (the subprocess imports the
    checkout's package, as this process does), no torchrun variables, unbuffered plain-text
    output, and ``OMP_NUM_THREADS`` when ``threads`` is given."""
    env = {key: value for key, value in os.environ.items() if key not in RANK_VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env["ANSI_COLORS_DISABLED"] = env["NO_COLOR"] = "1"
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def package_argv(args: List[str], processes: int = 1, torchrun: Optional[bool] = None) -> List[str]:
    """``python -m spacy_elmo ARGS``, or under torchrun with ``processes`` ranks (by default when
    there are several; ``torchrun=True`` for one rank, the launcher's code path on one GPU)."""
    if torchrun is None:
        torchrun = processes > 1
    launcher = [sys.executable, *TORCHRUN, "--nproc-per-node", str(processes)] if torchrun else [sys.executable]
    return [*launcher, "-m", "spacy_elmo", *args]


def descendants(pid: int) -> List[int]:
    """Every process below ``pid`` (children, their children, ...), read from /proc."""
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
