"""A copy of a biLM with every weight nudged by Gaussian noise: a control that tells how much a
component's score moves when its biLM changes by next to nothing (training is deterministic at
a seed, but not smooth in its inputs).

python scripts/perturb_bilm.py SOURCE OUTPUT_DIR [--scale 1e-4] [--seed 0]

SOURCE: a model directory (options.json + model.safetensors; "bundled": the bundled biLM). Each
floating-point tensor w becomes w + scale * std(w) * N(0, 1) (a zero-std tensor is kept as is).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

BUNDLED = Path(__file__).resolve().parents[2] / "spacy_elmo" / "models" / "en_wikitext_small"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("output", type=Path)
    parser.add_argument("--scale", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    source = BUNDLED if args.source == "bundled" else Path(args.source)
    generator = torch.Generator().manual_seed(args.seed)
    state = load_file(str(source / "model.safetensors"))
    for name, tensor in state.items():
        if tensor.is_floating_point() and tensor.numel() > 1:
            noise = torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype)
            state[name] = tensor + args.scale * tensor.std() * noise
    args.output.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "options.json", args.output / "options.json")
    save_file(state, str(args.output / "model.safetensors"))
    print(f"Wrote {args.output} (noise {args.scale:g} x each tensor's std)")


if __name__ == "__main__":
    main()
