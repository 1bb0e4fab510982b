"""Tables on stdout and the JSON file: the two ways a benchmark's figures leave it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

import typer
import wasabi

from ..files import write_json_atomically

Column = Tuple[str, str, str]  # (row key, header, format spec)


def format_value(value: Any, spec: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, (int, float)) and spec:
        return format(value, spec)
    return str(value)


def table(rows: Sequence[Dict[str, Any]], columns: Sequence[Column]) -> str:
    """A plain text table (wasabi's): text columns left-aligned, numbers right-aligned."""
    cells = [[format_value(row.get(key), spec) for key, _, spec in columns] for row in rows]
    aligns = [
        "r" if rows and all(isinstance(row.get(key), (int, float)) or row.get(key) is None for row in rows) else "l"
        for key, _, _ in columns
    ]
    text = wasabi.table(
        cells, header=[title for _, title, _ in columns], divider=True, spacing=2, max_col=10**6, aligns=aligns
    )
    return "\n".join(line.rstrip() for line in text.strip("\n").split("\n"))


def echo_table(title: str, rows: Sequence[Dict[str, Any]], columns: Sequence[Column]) -> None:
    typer.echo(f"\n{title}\n{table(rows, columns)}")


def echo_system(system: Dict[str, Any]) -> None:
    gpus = ", ".join(d["name"] for d in system.get("cuda_devices", [])) or "none"
    load = system.get("load_average_1min")
    typer.echo(
        f"torch {system['torch']}, {system['torch_threads']} threads, CPU {system['cpu']} "
        f"({system['cpu_count']} cores, {' '.join(system.get('cpu_flags', [])) or 'no'} flags"
        + (f", load {load}" if load is not None else "")
        + f"), GPU {gpus}"
    )
    if load is not None and system["cpu_count"] and load >= system["cpu_count"]:
        typer.echo(
            f"note: load average {load} on {system['cpu_count']} cores: other work shared the "
            "machine; the ratios were measured side by side, but absolute figures are low"
        )


def finish(result: Dict[str, Any], output: Optional[Path]) -> None:
    """How a bench's output ends: the machine it ran on, and every figure to ``output``."""
    typer.echo("")
    echo_system(result["system"])
    write_json(result, output)


def write_json(result: Dict[str, Any], path: Optional[Path], quiet: bool = False) -> None:
    """Write every figure of ``result`` (JSON-serialisable values only) to ``path``, under a
    temporary name first: a file that exists is whole (``quiet``: a bench's partial result
    after each case, written over, so that a cut run keeps what it measured)."""
    if path is None:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomically(path, result)
    if not quiet:
        typer.echo(f"\nwrote {path}")


def ratio(value: Optional[float], baseline: Optional[float]) -> Optional[float]:
    if value is None or not baseline:
        return None
    return value / baseline

