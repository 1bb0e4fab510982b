"""Held-out perplexity of a finished pretraining run, read from its output directory.

The run's ``config.cfg`` says how its text was read (tokenized or not, sentence splitting,
sequence length), so held-out text is read the same way; ``model.safetensors`` +
``softmax.safetensors`` + ``vocab.txt`` give the LM. Scores use the full softmax, as the trainer's
own evaluations do, so the figures are comparable with ``metrics.jsonl``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import torch
from confection import Config
from safetensors.torch import load_file

from ..nn.softmax import LMSoftmax
from ..sources import load_bilm
from .config import parse_settings
from .corpus import SequenceReader, resolve_files
from .model import BiLMLanguageModel
from .run_files import CONFIG_NAME, SOFTMAX_NAME, VOCAB_NAME
from .trainer import EvalResult, held_out_nll
from .vocab import Vocab


def evaluate_run(
    run_dir: Path,
    text: Sequence[str],
    max_tokens: Optional[int] = None,
    gpu_id: int = -1,
    progress: bool = True,
) -> EvalResult:
    """Forward, backward and average perplexity of the run in ``run_dir`` on ``text`` (files,
    directories or globs, read like the run's corpus), on at most ``max_tokens`` tokens."""
    run_dir = Path(run_dir)
    for name in (CONFIG_NAME, SOFTMAX_NAME, VOCAB_NAME):
        if not (run_dir / name).is_file():
            raise FileNotFoundError(
                f"{run_dir} is not a pretraining output directory: {name} is missing "
                "(evaluate-lm needs the directory that `pretrain` wrote; for a model without a "
                "softmax, e.g. a released one, fit one first: `pretrain` with [initialize] bilm "
                "set to it and initialize.softmax_only_steps = training.max_steps)"
            )
    settings = parse_settings(Config().from_disk(run_dir / CONFIG_NAME))
    device = torch.device("cpu") if gpu_id < 0 else torch.device("cuda", gpu_id)
    vocab = Vocab.load(run_dir / VOCAB_NAME)
    softmax = LMSoftmax(len(vocab), settings.options.lstm.projection_dim)
    softmax.load_state_dict(load_file(str(run_dir / SOFTMAX_NAME)))
    model = BiLMLanguageModel(load_bilm(run_dir), softmax).to(device).eval()
    files = [path for spec in text for path in resolve_files(spec)]
    reader = SequenceReader(files, settings.corpus)
    sums = held_out_nll(model, vocab, reader, settings.training.batch_tokens, max_tokens, progress)
    return EvalResult.from_sums(sums, ", ".join(map(str, text)))
