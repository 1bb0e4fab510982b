"""The pretraining loop: batches -> loss -> clipped update; logs, evaluations and checkpoints.

The output directory (``run_files.py`` names its files) is loadable by ``load_bilm(output_dir)``
and the ``elmo`` pipe at any time after the first checkpoint.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np
import torch
from confection import Config
from safetensors.torch import load_file, save_file
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from ..batching import pack_sequences
from ..nn.bilm import BiLM
from ..nn.precision import get_precision
from ..nn.softmax import LMSoftmax
from ..nn.threads import torch_threads
from ..sources import WeightSource, load_bilm_from, resolve_model, resolve_weight_source
from ..weights import save_bilm
from .config import (
    ConfigError,
    PretrainSettings,
    parse_settings,
    sampled_softmax_wanted,
    sparse_updates_wanted,
)
from .corpus import (
    BatchStream,
    CorpusError,
    DataPosition,
    SequenceReader,
    count_words,
    resolve_files,
)
from .distributed import DistributedContext
from .model import BiLMLanguageModel, LMBatch, init_bilm_tf_style, make_batch, perplexity
from .optimizers import make_optimizer, make_scheduler
from .run_files import CHECKPOINT_DIR, CONFIG_NAME, METRICS_NAME, SOFTMAX_NAME, STATE_FILE, VOCAB_NAME
from .vocab import Vocab, VocabError

#: Config keys a ``--resume`` may change (see ``Trainer._check_resumed_config``).
RESUMABLE_CHANGES = (
    "corpus.dev",
    "corpus.dev_max_tokens",
    "paths.dev",
    "system.threads",
    "training.checkpoint_every",
    "training.eval_every",
    "training.log_every",
    "training.max_steps",
)


class TrainingInterrupted(Exception):
    """Ctrl-C stopped the run after a step; its checkpoint is saved and ``--resume`` continues it."""


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


class Trainer:
    """Owns the model, optimizer, data stream and output directory of one pretraining run."""

    def __init__(
        self,
        settings: PretrainSettings,
        output_dir: Path,
        gpu_id: int = -1,
        resume: bool = False,
        show_progress: bool = True,
    ) -> None:
        """``settings``: a config parsed by ``config.parse_settings``. Sets torch's CPU thread
        count to ``[system] threads`` for this process (``pretrain`` restores it)."""
        if not isinstance(settings, PretrainSettings):
            raise TypeError(
                f"Trainer takes PretrainSettings (config.parse_settings(config)), got "
                f"{type(settings).__name__}"
            )
        self.settings = settings
        if settings.system.threads:
            torch.set_num_threads(settings.system.threads)
        self.output_dir = Path(output_dir)
        self.ctx = DistributedContext.from_env(gpu_id)
        self.device = self.ctx.device
        self.show_progress = show_progress and self.ctx.is_main
        self.step = 0
        self.tokens_seen = 0
        self._stop_requested = False  # this process got Ctrl-C
        self._stop_agreed = False  # some rank got it by this step: every rank stops after it

        softmax_only = settings.initialize.softmax_only_steps
        if softmax_only and self.ctx.distributed:
            raise ConfigError(
                f"[initialize] softmax_only_steps = {softmax_only} runs in one process only (this "
                f"run has {self.ctx.world_size}): fit the softmax in a short single-process run, "
                "then continue from its output directory with torchrun"
            )
        checkpoint = self._prepare_output_dir(resume)
        s = self.settings
        self.train_files = _corpus_files("corpus.train", s.corpus.train)
        self.dev_files = _corpus_files("corpus.dev", s.corpus.dev) if s.corpus.dev else []
        if self.dev_files and next(iter(SequenceReader(self.dev_files, s.corpus)), None) is None:
            # found now, not at the first evaluation after eval_every steps
            raise CorpusError(f"corpus.dev {s.corpus.dev} holds no tokens (empty or blank lines only)")
        self.vocab = self._prepare_vocab(resume)
        self.use_sampled = sampled_softmax_wanted(s.objective, len(self.vocab))
        self.sparse_updates = sparse_updates_wanted(s, self.use_sampled)
        self.model = self._build_model(resume)
        self.ddp_model = self._wrap_distributed(self.model)
        self.optimizer = make_optimizer(self.model, s.optimizer)
        self.scheduler = make_scheduler(self.optimizer, s.optimizer, s.training.max_steps)
        self.scaler = torch.amp.GradScaler(
            self.device.type, enabled=get_precision(s.training.precision).needs_grad_scaler
        )
        self.generator = self._seed_rank()
        self.stream = BatchStream(
            self.train_files,
            s.corpus,
            s.training.batch_tokens,
            s.corpus.shuffle_buffer,
            s.system.seed,
            self.ctx.rank,
            self.ctx.world_size,
        )
        self.start_position = DataPosition()
        if resume:
            self._load_checkpoint(checkpoint)
            self._drop_metrics_after(self.step)

    @property
    def config(self) -> Optional[Config]:
        return self.settings.config

    def _written_config(self) -> Config:
        """The run's config as parsed, with the thread count it ran with (a config written
        before ``[system] threads`` existed gets the default it used)."""
        config = copy.deepcopy(self.settings.config)
        config.setdefault("system", {})["threads"] = self.settings.system.threads
        return config

    def _prepare_output_dir(self, resume: bool) -> Path:
        """Refuse to overwrite (or to resume nothing); write config.cfg. Returns the checkpoint
        path."""
        checkpoint = self.output_dir / CHECKPOINT_DIR / STATE_FILE
        if checkpoint.exists() and not resume:
            raise FileExistsError(
                f"{self.output_dir} already holds a checkpoint: pass --resume to continue it, "
                "or choose a new output directory"
            )
        if resume and not checkpoint.exists():
            raise FileNotFoundError(f"--resume: no checkpoint at {checkpoint}")
        if resume:
            self._check_resumed_config()
        if self.ctx.is_main:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            if not resume:  # a fresh run in a folder with an earlier run's curve but no checkpoint
                (self.output_dir / METRICS_NAME).unlink(missing_ok=True)
            if self.settings.config is not None:
                self._written_config().to_disk(self.output_dir / CONFIG_NAME)
        self.ctx.barrier()
        return checkpoint

    def _check_resumed_config(self) -> None:
        """A resumed run continues the saved one: only how long it runs, how often it logs,
        evaluates and saves, what it evaluates on and its thread count may change."""
        saved_file = self.output_dir / CONFIG_NAME
        if self.settings.config is None or not saved_file.is_file():
            return
        saved = _flat(Config().from_disk(saved_file, interpolate=False))
        ours = _flat(self._written_config())
        changed = [
            f"{key}: {saved[key]!r} -> {ours[key]!r}"
            for key in sorted(saved.keys() & ours.keys())
            if saved[key] != ours[key] and key not in RESUMABLE_CHANGES
        ]
        if changed:
            raise ConfigError(
                f"--resume: the config differs from the run's {saved_file} in "
                + "; ".join(changed)
                + f". A resumed run may change only {', '.join(RESUMABLE_CHANGES)}; to train on "
                f"with another recipe, start a new run from this one: --paths.init_bilm {self.output_dir}"
            )

    def _build_model(self, resume: bool) -> BiLMLanguageModel:
        """The biLM (bilm-tf initialisation, or ``[initialize] bilm``) and the softmax."""
        s = self.settings
        torch.manual_seed(s.system.seed)
        bilm = BiLM(s.options)
        init_bilm_tf_style(bilm)
        softmax = LMSoftmax(len(self.vocab), s.options.lstm.projection_dim)
        if s.initialize.bilm and not resume:
            self._initialize_from(bilm, softmax)
        if self.sparse_updates:
            softmax.row_sparse_gradients = True
            # Say so explicitly (the default), which also silences torch's warning about it.
            torch.sparse.check_sparse_tensor_invariants.disable()
        model = BiLMLanguageModel(bilm, softmax, s.objective.dropout, s.training.precision)
        return model.to(self.device)

    def _wrap_distributed(self, model: BiLMLanguageModel) -> torch.nn.Module:
        if not self.ctx.distributed:
            return model
        if self.sparse_updates:
            # Their row gradients are exchanged by publish_row_gradients, not by DDP.
            DDP._set_params_and_buffers_to_ignore_for_model(model, ["softmax.weight", "softmax.bias"])
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return DDP(model, device_ids)

    def _seed_rank(self) -> torch.Generator:
        """Per-rank seeds of Python, NumPy and torch; the softmax sampler's generator."""
        seed, rank = self.settings.system.seed, self.ctx.rank
        generator = torch.Generator(device=self.device)
        generator.manual_seed(seed * 1000 + rank)
        random.seed(seed + rank)
        np.random.seed(seed + rank)
        torch.manual_seed(seed * 1000 + rank + 1)
        return generator

    # ----------------------------------------------------------------------------- training
    def train(self) -> Path:
        """Run until ``training.max_steps``; returns the output directory."""
        s = self.settings
        t = s.training
        batches = self.stream.batches(self.start_position)
        previous_handler = signal.signal(signal.SIGINT, self._request_stop)
        bar = tqdm(
            total=t.max_steps,
            initial=self.step,
            disable=not self.show_progress,
            unit="step",
            desc="pretrain",
            dynamic_ncols=True,
        )
        window = _Window()
        try:
            while self.step < t.max_steps and not self._should_stop():
                sequences = next(batches)
                nll, count = self.train_step(make_batch(sequences, self.vocab))
                self.step += 1
                if self.step == s.initialize.softmax_only_steps and self.ctx.is_main:
                    tqdm.write(f"Step {self.step}: softmax fitted; from now on the biLM trains too")
                window.add(nll, count)
                bar.update(1)
                if self.step % t.log_every == 0 or self.step == t.max_steps:
                    record = window.flush(
                        self.step, self.tokens_seen, self.scheduler.get_last_lr()[0]
                    )
                    record["softmax"] = "sampled" if self.use_sampled else "full"
                    record["skipped_lines"] = self.stream.last_stats.skipped_lines
                    record["threads"] = torch.get_num_threads()
                    self._log(record)
                    bar.set_postfix(
                        loss=f"{record['loss']:.3f}",
                        ppl=f"{record['ppl']:.1f}",
                        tok_s=f"{record['tokens_per_s']:.0f}",
                    )
                if self.dev_files and (self.step % t.eval_every == 0 or self.step == t.max_steps):
                    result = self.evaluate()
                    self._log(
                        {
                            "step": self.step,
                            "dev_tokens": result.tokens,
                            "dev_ppl_forward": result.ppl_forward,
                            "dev_ppl_backward": result.ppl_backward,
                            "dev_ppl": result.ppl_average,
                        }
                    )
                    window.restart_clock()
                if self.step % t.checkpoint_every == 0:
                    self.save_checkpoint()
                    window.restart_clock()
        finally:
            bar.close()
            signal.signal(signal.SIGINT, previous_handler)
        self.save_checkpoint()
        if self._should_stop() and self.step < t.max_steps:  # a stop on the last step is no stop
            raise TrainingInterrupted(
                f"interrupted at step {self.step} of {t.max_steps}: checkpoint saved in "
                f"{self.output_dir}; continue with --resume"
            )
        return self.output_dir

    def train_step(self, batch: LMBatch) -> Tuple[float, int]:
        """One update on ``batch`` (``make_batch``), as ``train`` makes them: for custom loops and
        benchmarks. Returns this step's global summed NLL (both directions) and count."""
        s = self.settings
        self.model.train()
        self.model.bilm_frozen = self.step < s.initialize.softmax_only_steps
        batch = batch.to(self.device)
        nll = self.ddp_model(
            batch, s.objective.n_negative_samples if self.use_sampled else None, self.generator
        )
        # Normalise by the targets of all ranks so that DDP's gradient average equals the
        # gradient of one process holding every rank's sequences.
        # The same all-reduce tells every rank whether any was asked to stop.
        totals = torch.tensor(
            [float(nll.detach().sum()), 2.0 * batch.n_targets, float(self._stop_requested)],
            dtype=torch.float64,
            device=self.device,
        )
        self.ctx.all_reduce_sum(totals)
        global_nll, global_count = float(totals[0]), int(totals[1])
        self._stop_agreed = bool(totals[2] > 0)
        loss = nll.sum() * self.ctx.world_size / global_count
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        if self.sparse_updates:
            self.model.softmax.publish_row_gradients(self.ctx.gather_rows)
        if s.optimizer.clip_norm:
            self.scaler.unscale_(self.optimizer)
            clip_grad_norm(self.model.parameters(), s.optimizer.clip_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.tokens_seen += global_count // 2
        return global_nll, global_count

    def _should_stop(self) -> bool:
        """Ranks stop at the same step (one that stopped alone would wait forever in the others'
        next collective), so under torchrun only the flag agreed in ``train_step`` counts."""
        return self._stop_agreed if self.ctx.distributed else self._stop_requested

    def _request_stop(self, signum, frame) -> None:
        if self._stop_requested:
            raise KeyboardInterrupt
        self._stop_requested = True
        if self.ctx.is_main:
            tqdm.write("Ctrl-C: finishing this step and saving a checkpoint (again to abort)")

    # ----------------------------------------------------------------------------- evaluation
    @torch.no_grad()
    def evaluate(self) -> EvalResult:
        """Held-out perplexity of both LMs with the full softmax."""
        s = self.settings
        self.model.eval()
        reader = SequenceReader(self.dev_files, s.corpus, self.ctx.rank, self.ctx.world_size)
        max_tokens = s.corpus.dev_max_tokens
        limit = max_tokens // self.ctx.world_size if max_tokens else None
        sums = held_out_nll(self.model, self.vocab, reader, s.training.batch_tokens, limit)
        self.ctx.all_reduce_sum(sums)
        return EvalResult.from_sums(sums, s.corpus.dev)

    # ----------------------------------------------------------------------------- state
    def save_checkpoint(self) -> None:
        """Write the loadable model files and the resumable training state (rank 0)."""
        per_rank = self.ctx.gather_objects(
            {
                "position": asdict(self.stream.position),
                "rng": _rng_state(),
                "generator": self.generator.get_state(),
            }
        )
        if not self.ctx.is_main:
            self.ctx.barrier()
            return
        save_bilm(self.model.bilm, self.output_dir)
        save_file(
            {k: v.detach().cpu().contiguous() for k, v in self.model.softmax.state_dict().items()},
            str(self.output_dir / SOFTMAX_NAME),
        )
        state = {
            "step": self.step,
            "tokens_seen": self.tokens_seen,
            "world_size": self.ctx.world_size,
            "vocab_sha1": _vocab_hash(self.vocab),
            "vocab_size": len(self.vocab),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "ranks": per_rank,
        }
        directory = self.output_dir / CHECKPOINT_DIR
        directory.mkdir(exist_ok=True)
        tmp = directory / (STATE_FILE + ".tmp")
        torch.save(state, tmp)
        tmp.replace(directory / STATE_FILE)
        self.ctx.barrier()

    def _load_checkpoint(self, path: Path) -> None:
        state = torch.load(path, map_location=self.device, weights_only=False)
        if state["vocab_sha1"] != _vocab_hash(self.vocab) or state["vocab_size"] != len(self.vocab):
            raise VocabError(
                f"{self.output_dir / VOCAB_NAME}: this vocabulary ({len(self.vocab)} words) is not "
                f"the one checkpoint {path} was trained with ({state['vocab_size']} words)"
            )
        if state["world_size"] != self.ctx.world_size:
            raise ConfigError(
                f"{path} was written by {state['world_size']} processes; resume with the same "
                f"number (now {self.ctx.world_size}) so every rank continues its own shard"
            )
        try:
            self.model.load_state_dict(state["model"])
        except RuntimeError as err:
            raise ConfigError(
                f"{path}: the checkpoint does not match the [model] config: {err}"
            ) from err
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.step = state["step"]
        self.tokens_seen = state["tokens_seen"]
        mine = state["ranks"][self.ctx.rank]
        self.start_position = DataPosition(**mine["position"])
        self.generator.set_state(mine["generator"].cpu())
        _set_rng_state(mine["rng"])

    def _initialize_from(self, bilm: BiLM, softmax: LMSoftmax) -> None:
        """Copy the weights of ``initialize.bilm`` (and its softmax, when it comes with this run's
        vocabulary) into the fresh model."""
        s = self.settings
        weights = init_weight_source(s)
        source = load_bilm_from(weights)
        if source.options != s.options:
            ours, theirs = _flat(s.options.to_dict()), _flat(source.options.to_dict())
            differ = [
                f"{key}: {ours[key]!r} in [model], {theirs[key]!r} in the model"
                for key in ours
                if ours[key] != theirs[key]
            ]
            raise ConfigError(
                f"initialize.bilm {s.initialize.bilm} has another shape than [model] ("
                + "; ".join(differ)
                + "). `python -m spacy_elmo init-config CONFIG --model DIR` writes a matching config"
            )
        bilm.load_state_dict(source.state_dict())
        softmax_file = weights.directory / SOFTMAX_NAME
        vocab_file = weights.directory / VOCAB_NAME
        with_softmax = (
            softmax_file.is_file()
            and vocab_file.is_file()
            and Vocab.load(vocab_file).words == self.vocab.words
        )
        if with_softmax:
            softmax.load_state_dict(load_file(str(softmax_file)))
        if self.ctx.is_main:
            tqdm.write(
                f"Initialized the biLM from {s.initialize.bilm}"
                + (" and its softmax" if with_softmax else "; the softmax starts fresh")
            )

    def _prepare_vocab(self, resume: bool) -> Vocab:
        s = self.settings
        target = self.output_dir / VOCAB_NAME
        if resume:
            return Vocab.load(target)
        if s.vocab.path:
            vocab = Vocab.load(s.vocab.path)
        elif self.ctx.is_main:
            counts, stats = count_words(self.train_files, s.corpus)
            if not counts:
                raise CorpusError(
                    f"the training corpus {s.corpus.train} holds no tokens (empty, blank lines only, or "
                    f"every line skipped: {stats.skipped_lines} undecodable lines)"
                )
            vocab = Vocab.from_counts(counts, s.vocab.size, s.vocab.min_count)
        else:
            vocab = None
        if self.ctx.is_main:
            vocab.save(target)
        self.ctx.barrier()
        return vocab if vocab is not None else Vocab.load(target)

    def _drop_metrics_after(self, step: int) -> None:
        """Remove the metrics.jsonl rows of steps after ``step``: a run killed between
        checkpoints (no Ctrl-C: SIGKILL, a lost machine) logged steps that resuming from its last
        checkpoint computes again, and they would otherwise appear twice in the curve."""
        path = self.output_dir / METRICS_NAME
        if not self.ctx.is_main or not path.exists():
            return
        lines = path.read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if line.strip() and json.loads(line).get("step", 0) <= step]
        if len(kept) < len(lines):
            path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")

    def _log(self, record: Dict) -> None:
        if not self.ctx.is_main:
            return
        with (self.output_dir / METRICS_NAME).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")


def pretrain(
    config: Config,
    output_dir: Path,
    gpu_id: int = -1,
    resume: bool = False,
    show_progress: bool = True,
) -> Path:
    """Train a biLM as ``config`` says, writing everything to ``output_dir``; torch's CPU thread
    count is ``[system] threads`` during the run and restored after it."""
    settings = parse_settings(config)
    with torch_threads(settings.system.threads or None):
        trainer = Trainer(settings, output_dir, gpu_id, resume, show_progress)
        try:
            return trainer.train()
        finally:
            trainer.ctx.shutdown()


class _Window:
    """Running training statistics between two log lines."""

    def __init__(self) -> None:
        self.restart_clock()
        self.nll = 0.0
        self.count = 0

    def restart_clock(self) -> None:
        self.start = time.perf_counter()
        self.timed_tokens = 0

    def add(self, nll: float, count: int) -> None:
        self.nll += nll
        self.count += count
        self.timed_tokens += count // 2

    def flush(self, step: int, tokens_seen: int, lr: float) -> Dict:
        """loss: mean NLL per prediction (of the sampled softmax when it is on, which is not a
        perplexity of the full model); tokens_per_s: predictions per direction per second."""
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        loss = self.nll / max(self.count, 1)
        record = {
            "step": step,
            "tokens": tokens_seen,
            "loss": loss,
            "ppl": math.exp(min(loss, 50.0)),
            "lr": lr,
            "tokens_per_s": self.timed_tokens / elapsed,
        }
        self.nll, self.count = 0.0, 0
        self.restart_clock()
        return record


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
    for sequences in _dev_batches(reader, batch_tokens, limit):
        batch = make_batch(sequences, vocab).to(device)
        nll = model(batch)
        sums += torch.tensor(
            [float(nll[0]), float(nll[1]), batch.n_targets], dtype=torch.float64, device=device
        )
        bar.update(batch.n_targets)
    bar.close()
    return sums


def _dev_batches(
    reader: SequenceReader, batch_tokens: int, limit: Optional[int]
) -> Iterator[List[List[str]]]:
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


def clip_grad_norm(parameters: Iterable[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` that also takes sparse gradients (the softmax rows):
    scales every gradient by min(1, max_norm / global norm); returns the global norm."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    norms = [
        torch.linalg.vector_norm(g.coalesce().values() if g.is_sparse else g, dtype=torch.float32)
        for g in grads
    ]
    total = torch.linalg.vector_norm(torch.stack(norms))
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.to(g.device, g.dtype))
    return total


def init_weight_source(s: PretrainSettings) -> WeightSource:
    """The files of ``[initialize] bilm`` (a model directory, the name of a downloaded model,
    or an options.json with ``weight_file``)."""
    if s.initialize.weight_file is None:
        return resolve_model(s.initialize.bilm, what="initialize.bilm")
    return resolve_weight_source(
        options_file=s.initialize.bilm, weight_file=s.initialize.weight_file
    )


def _rng_state() -> Dict:
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def _corpus_files(key: str, spec: str) -> List[Path]:
    try:
        return resolve_files(spec)
    except CorpusError as err:
        raise CorpusError(f"{key}: {err}") from None


def _flat(data: Dict, prefix: str = "") -> Dict[str, object]:
    """{"lstm": {"dim": 4}} -> {"lstm.dim": 4}."""
    flat: Dict[str, object] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _vocab_hash(vocab: Vocab) -> str:
    return hashlib.sha1("\n".join(vocab.words).encode("utf-8")).hexdigest()
