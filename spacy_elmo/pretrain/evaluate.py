"""Held-out perplexity with the full softmax: the trainer's evaluations (``held_out_nll``) and a
finished run's (``evaluate_run``, ``evaluate-lm``), which reads held-out text the way the run's
``config.cfg`` read its training text, so its figures compare with ``metrics.jsonl``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

import torch
from confection import Config
from safetensors.torch import load_file
from tqdm import tqdm

from ..batching import pack_sequences
from ..nn.softmax import LMSoftmax
from ..nn.threads import torch_threads
from ..sources import load_bilm
from ..text_files import resolve_files
from .config import parse_settings
from .corpus import CorpusError, SequenceReader, check_text
from .model import BiLMLanguageModel, make_batch, perplexity
from .run_files import CONFIG_NAME, SOFTMAX_NAME, VOCAB_NAME
from .vocab import Vocab


@dataclass
class EvalResult:
    ppl_forward: float
    ppl_backward: float
    tokens: int

    @property
    def ppl_average(self) -> float:
        """The paper's figure: the mean of the two directions' perplexities."""
        return 0.5 * (self.ppl_forward + self.ppl_backward)

    @classmethod
    def from_sums(cls, sums: torch.Tensor, source: object) -> "EvalResult":
        """From (forward NLL sum, backward NLL sum, targets), as ``held_out_nll`` returns."""
        count = int(sums[2])
        if count == 0:
            raise CorpusError(f"the held-out corpus {source} gives no text to evaluate on")
        return cls(perplexity(float(sums[0]), count), perplexity(float(sums[1]), count), count)


@torch.no_grad()
def held_out_nll(
    model: BiLMLanguageModel,
    vocab: Vocab,
    reader: SequenceReader,
    batch_tokens: int,
    limit: Optional[int] = None,
    progress: bool = False,
) -> torch.Tensor:
    """Score ``reader``'s sequences with the full softmax (``model`` in eval mode). Returns
    float64 (3,) on the model's device: forward NLL sum, backward NLL sum, number of targets."""
    device = next(model.parameters()).device
    sums = torch.zeros(3, dtype=torch.float64, device=device)
    bar = tqdm(desc="perplexity", unit="target", disable=not progress)
    for sequences in length_sorted_batches(reader, batch_tokens, limit):
        batch = make_batch(sequences, vocab).to(device)
        nll = model(batch)
        sums += torch.tensor(
            [float(nll[0]), float(nll[1]), batch.n_targets], dtype=torch.float64, device=device
        )
        bar.update(batch.n_targets)
    bar.close()
    return sums


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
    files = [path for spec in text for path in resolve_files(spec)]
    check_text(files, settings.corpus)  # a bad line is said before the model loads
    device = torch.device("cpu") if gpu_id < 0 else torch.device("cuda", gpu_id)
    model, vocab = load_language_model(run_dir)
    model = model.to(device)
    reader = SequenceReader(files, settings.corpus)
    # The run's own thread count ([system] threads), as its training evaluations ran: PyTorch's
    # default (a thread per core) is the path that stalls on a shared machine.
    with torch_threads(settings.system.thread_count):
        sums = held_out_nll(model, vocab, reader, settings.training.batch_tokens, max_tokens, progress)
    return EvalResult.from_sums(sums, ", ".join(map(str, text)))


def load_language_model(directory: Path) -> Tuple[BiLMLanguageModel, Vocab]:
    """The LM in ``directory`` (a biLM with ``softmax.safetensors`` and ``vocab.txt`` beside it,
    as a pretraining run writes them), in eval mode on the CPU, and its vocabulary."""
    directory = Path(directory)
    vocab = Vocab.load(directory / VOCAB_NAME)
    bilm = load_bilm(directory)
    softmax = LMSoftmax(len(vocab), bilm.options.lstm.projection_dim)
    softmax.load_state_dict(load_file(str(directory / SOFTMAX_NAME)))
    return BiLMLanguageModel(bilm, softmax).eval(), vocab


def length_sorted_batches(
    reader: SequenceReader, batch_tokens: int, limit: Optional[int] = None
) -> Iterator[List[List[str]]]:
    """``reader``'s sequences (until ``limit`` tokens) in batches of about ``batch_tokens``,
    each thousand sorted by length so that a batch pads little."""
    chunk: List[List[str]] = []
    seen = 0
    for sequence in reader:
        if limit is not None and seen >= limit:
            break
        seen += len(sequence) + 1
        chunk.append(sequence)
        if len(chunk) >= 1000:
            yield from pack_sequences(sorted(chunk, key=len), batch_tokens, overhead=2)
            chunk = []
    if chunk:
        yield from pack_sequences(sorted(chunk, key=len), batch_tokens, overhead=2)
