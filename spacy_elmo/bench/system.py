"""Where a benchmark ran: every JSON result carries this, since figures mean nothing without it."""

from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import subprocess
from typing import Any, Dict, List, Optional

import torch

from ..nn.cpuinfo import cpuinfo

#: CPU features that decide which kernels run: bf16 is emulated, hence slow, without avx512_bf16
#: or amx_bf16; int8 products (``torch._int_mm``) use VNNI or AMX where present, AVX2 otherwise.
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    return cpuinfo("model name") or platform.processor() or platform.machine()


def cpu_flags() -> List[str]:
    flags = set((cpuinfo("flags") or "").split())
    return [flag for flag in CPU_FLAGS if flag in flags]


def system_info() -> Dict[str, Any]:
    """Versions, CPU, thread count and CUDA devices (``gpu_info``), as plain JSON values."""
    info: Dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "spacy": _module_version("spacy"),
        "cpu": cpu_name(),
        "cpu_flags": cpu_flags(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "cuda_available": torch.cuda.is_available(),
        "cuda_devices": _cuda_devices(),
        **gpu_info(),
    }
    load = _load_average()
    if load is not None:
        info["load_average_1min"] = load
    return info


def gpu_info() -> Dict[str, Any]:
    """What a CUDA figure depends on: GPU, driver, CUDA, cuDNN, CuPy (each None where absent)."""
    available = torch.cuda.is_available()
    return {
        "gpu": torch.cuda.get_device_name(0) if available else None,
        "gpu_driver": _nvidia_driver() if available else None,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cupy": _module_version("cupy"),
    }


def _module_version(name: str) -> Optional[str]:
    """A package's ``__version__``, or None where it is not installed."""
    if importlib.util.find_spec(name) is None:
        return None
    try:
        return str(importlib.import_module(name).__version__)
    except Exception:  # a broken install (CuPy without its CUDA libraries) is an absent one here
        return None


def _nvidia_driver() -> Optional[str]:
    """The driver version as nvidia-smi reports it (PyTorch does not say)."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None


def _cuda_devices() -> List[Dict[str, Any]]:
    if not torch.cuda.is_available():
        return []
    devices = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        devices.append(
            {"index": i, "name": props.name, "memory_gb": round(props.total_memory / 2**30, 1)}
        )
    return devices


def _load_average() -> float | None:
    """Other work on the machine slows every path; the load average says how busy it was."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None
