"""``benchmarks load``: how long it takes to get a released-format model into memory.

Three loaders on one random-weight model of a released shape, written once to the work
directory: ``load_bilm`` on the bilm-tf HDF5 file, the AllenNLP-style per-tensor loader on the
same file (the baseline, :mod:`.per_tensor_loader`), and ``load_bilm`` on the native safetensors
checkpoint. Each is timed cold (the file evicted from the OS page cache with
``posix_fadvise(DONTNEED)`` just before, so the disk read counts) and warm (file cached); the
best of ``repeats`` runs is reported, the loaders taking turns within each repeat.
"""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path
from typing import Any, Dict, List

import torch
from tqdm import tqdm

from spacy_elmo.bench.system import system_info
from spacy_elmo.nn.bilm import BiLM
from spacy_elmo.sources import load_bilm

from .per_tensor_loader import load_bilm_per_tensor
from .shapes import cached_model, model_files, shape_source

BASELINE = "per-tensor h5py (AllenNLP style)"


def evict_from_page_cache(path: Path) -> bool:
    """Drop ``path`` from the OS page cache (Linux, no privileges needed); False if unsupported."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def run_load_bench(
    workdir: Path, shape: str = "original", seed: int = 0, repeats: int = 3, progress: bool = True
) -> Dict[str, Any]:
    directory = cached_model(workdir, shape, seed, bilm_tf=True, progress=progress)
    files = model_files(directory)
    loaders: Dict[str, Dict[str, Any]] = {
        "load_bilm (bilm-tf HDF5)": {
            "load": lambda: load_bilm(files["options"], files["hdf5"]),
            "file": files["hdf5"],
        },
        BASELINE: {
            "load": lambda: load_bilm_per_tensor(files["options"], files["hdf5"]),
            "file": files["hdf5"],
        },
        "load_bilm (native safetensors)": {
            "load": lambda: load_bilm(files["options"], files["safetensors"]),
            "file": files["safetensors"],
        },
    }
    _prime(workdir, seed)
    times, last, evicted = _time_loads(loaders, repeats, progress)
    identical = _same_tensors(last["load_bilm (bilm-tf HDF5)"], last[BASELINE])
    identical_native = _same_tensors(last["load_bilm (bilm-tf HDF5)"], last["load_bilm (native safetensors)"])
    base = times[BASELINE]
    rows = []
    for name, loader in loaders.items():
        cold, warm = min(times[name]["cold"]), min(times[name]["warm"])
        rows.append(
            {
                "loader": name,
                "file": loader["file"].name,
                "file_mb": loader["file"].stat().st_size / 2**20,
                "cold_s": cold,
                "warm_s": warm,
                "cold_speedup": min(base["cold"]) / cold,
                "warm_speedup": min(base["warm"]) / warm,
                "cold_all_s": times[name]["cold"],
                "warm_all_s": times[name]["warm"],
            }
        )
    n_params = sum(p.numel() for p in last[BASELINE].parameters())
    return {
        "benchmark": "load",
        "system": system_info(),
        "settings": {
            "shape": shape,
            "shape_source": shape_source(shape),
            "seed": seed,
            "repeats": repeats,
            "model_dir": str(directory),
        },
        "n_parameters": n_params,
        "page_cache_eviction": evicted,
        "identical_tensors": identical,
        "identical_tensors_native": identical_native,
        "baseline": BASELINE,
        "rows": rows,
    }


def _time_loads(loaders: Dict[str, Dict[str, Any]], repeats: int, progress: bool):
    """Each loader ``repeats`` times from a cold (evicted) and a warm page cache, interleaved:
    ``(times {name: {"cold": [s], "warm": [s]}}, the last model each loaded, whether every
    eviction worked)``."""
    times: Dict[str, Dict[str, List[float]]] = {name: {"cold": [], "warm": []} for name in loaders}
    last: Dict[str, BiLM] = {}
    evicted = True
    runs = [(r, mode, name) for r in range(repeats) for mode in ("cold", "warm") for name in loaders]
    for _, mode, name in tqdm(runs, desc="load", unit="load", disable=not progress):
        loader = loaders[name]
        last.pop(name, None)
        gc.collect()
        if mode == "cold":
            evicted = evict_from_page_cache(loader["file"]) and evicted
        else:
            loader["file"].read_bytes()  # make sure it is cached
        start = time.perf_counter()
        last[name] = loader["load"]()
        times[name][mode].append(time.perf_counter() - start)
    return times, last, evicted


def _prime(workdir: Path, seed: int) -> None:
    """Load a tiny model once with every loader, so that no loader's first call pays for
    imports and lazy initialisation on behalf of the others."""
    files = model_files(cached_model(workdir, "fixture", seed, bilm_tf=True, progress=False))
    load_bilm(files["options"], files["hdf5"])
    load_bilm(files["options"], files["safetensors"])
    load_bilm_per_tensor(files["options"], files["hdf5"])


def _same_tensors(a: BiLM, b: BiLM) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


LOAD_COLUMNS = [
    ("loader", "loader", ""),
    ("file_mb", "file MB", ".0f"),
    ("cold_s", "cold s", ".3f"),
    ("warm_s", "warm s", ".3f"),
    ("cold_speedup", "cold x baseline", ".2f"),
    ("warm_speedup", "warm x baseline", ".2f"),
]
