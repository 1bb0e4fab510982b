"""The pretraining loop: batches -> loss -> clipped update; logs, evaluations and checkpoints.

The output directory (``run_files.py`` names its files) is loadable by ``load_bilm(output_dir)``
and the ``elmo`` pipe at any time after the first checkpoint.
"""

from __future__ import annotations

import copy
import json
import math
import random
import signal
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np
import torch
from confection import Config
from safetensors.torch import load_file
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import record_function
from tqdm import tqdm

from ..distributed import DistributedContext
from ..nn.bilm import BiLM
from ..nn.precision import get_precision, training_precision
from ..nn.softmax import LMSoftmax
from ..nn.threads import torch_threads
from ..sources import WeightSource, load_bilm_from, resolve_weight_source
from .checkpoint import (
    CarriedStates,
    TrainingState,
    check_resumed_config,
    checkpoint_path,
    drop_metrics_after,
    flatten,
    load_checkpoint,
    save_checkpoint,
)
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
    WindowStream,
    count_words,
    resolve_files,
)
from .evaluate import EvalResult, held_out_nll
from .model import (
    PHASES,
    BiLMLanguageModel,
    LMBatch,
    WindowBatch,
    init_bilm_tf_style,
    make_batch,
    make_window_batch,
)
from .optimizers import clip_grad_norm, make_optimizer, make_scheduler
from .run_files import CONFIG_NAME, METRICS_NAME, SOFTMAX_NAME, VOCAB_NAME
from .static_step import StaticStep, resolve_step_kind
from .vocab import Vocab


class TrainingInterrupted(Exception):
    """Ctrl-C stopped the run after a step; its checkpoint is saved and ``--resume`` continues it."""


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
        count to ``[system] threads`` for this process, and on CUDA with ``precision = "tf32"``
        the TF32 switches on (``pretrain`` restores both)."""
        if not isinstance(settings, PretrainSettings):
            raise TypeError(
                f"Trainer takes PretrainSettings (config.parse_settings(config)), got "
                f"{type(settings).__name__}"
            )
        self.settings = settings
        torch.set_num_threads(settings.system.thread_count)
        self.output_dir = Path(output_dir)
        self.ctx = DistributedContext.from_env(gpu_id)
        self.device = self.ctx.device
        self.show_progress = show_progress and self.ctx.is_main
        self.step = 0
        self.tokens_seen = 0
        self._stop_requested = False  # this process got Ctrl-C
        self._stop_agreed = False  # some rank got it by this step: every rank stops after it

        softmax_only = settings.initialize.softmax_only_steps
        if softmax_only and self.ctx.world_size > 1:
            raise ConfigError(
                f"[initialize] softmax_only_steps = {softmax_only} runs in one process only (this "
                f"run has {self.ctx.world_size}): fit the softmax in a short single-process run, "
                "then continue from its output directory with torchrun"
            )
        self._prepare_output_dir(resume)
        s = self.settings
        self.train_files = _corpus_files("corpus.train", s.corpus.train)
        self.dev_files = _corpus_files("corpus.dev", s.corpus.dev) if s.corpus.dev else []
        if self.dev_files and next(iter(SequenceReader(self.dev_files, s.corpus)), None) is None:
            # found now, not at the first evaluation after eval_every steps
            raise CorpusError(f"corpus.dev {s.corpus.dev} holds no tokens (empty or blank lines only)")
        self.vocab = self._prepare_vocab(resume)
        self.use_sampled = sampled_softmax_wanted(s.objective, len(self.vocab))
        #: The model's mode ("tf32" trains as "fp32" in a process with TF32 on).
        self.precision = training_precision(s.training.precision, self.device)
        self.step_kind = resolve_step_kind(
            s.training.step, self.windows, self.device, s.training.precision
        )
        self.sparse_updates = sparse_updates_wanted(s, self.use_sampled, self.step_kind)
        self.model = self._build_model(resume)
        self.ddp_model = self._wrap_distributed(self.model)
        graphed = self.step_kind != "eager" and self.device.type == "cuda"
        self.optimizer = make_optimizer(self.model, s.optimizer, self.device if graphed else None)
        self.scheduler = make_scheduler(self.optimizer, s.optimizer, s.training.max_steps)
        self.scaler = torch.amp.GradScaler(
            self.device.type, enabled=get_precision(self.precision).needs_grad_scaler
        )
        self.generator = self._seed_rank()
        self.stream = self._make_stream()
        self.carried = CarriedStates()
        self._pending = _Pending(self.device)
        self.static_step = None
        #: Window batches a static step could not take since the last log record.
        self.eager_fallbacks = 0
        if self.step_kind != "eager":
            windows = s.training.batch_tokens // s.corpus.window_length * s.corpus.window_length
            self.static_step = StaticStep(self, self.step_kind, s.training.distinct_tokens or windows)
        self.start_position = DataPosition()
        if resume:
            self.step, self.tokens_seen, self.start_position = load_checkpoint(
                self.output_dir, self.ctx, self._training_state(), self.vocab
            )
            if self.ctx.is_main:
                drop_metrics_after(self.output_dir, self.step)

    @property
    def config(self) -> Optional[Config]:
        return self.settings.config

    def _written_config(self) -> Config:
        """The run's config as parsed, with the thread count it ran with (a config written
        before ``[system] threads`` existed gets the default it used)."""
        config = copy.deepcopy(self.settings.config)
        config.setdefault("system", {})["threads"] = self.settings.system.threads
        return config

    def _training_state(self) -> TrainingState:
        return TrainingState(
            self.model, self.optimizer, self.scheduler, self.scaler, self.generator, self.carried
        )

    @property
    def windows(self) -> bool:
        """Whether batches are windows of running text (``[corpus] batching``)."""
        return self.settings.corpus.batching == "windows"

    def _make_stream(self) -> Union[BatchStream, WindowStream]:
        s = self.settings
        shard = (s.corpus.shuffle_buffer, s.system.seed, self.ctx.rank, self.ctx.world_size)
        if not self.windows:
            return BatchStream(self.train_files, s.corpus, s.training.batch_tokens, *shard)
        rows = s.training.batch_tokens // s.corpus.window_length  # at least 1: parse_settings
        return WindowStream(self.train_files, s.corpus, rows, s.corpus.window_length, *shard)

    def batches(self, start: Optional[DataPosition] = None) -> Iterator[Union[LMBatch, WindowBatch]]:
        """The training batches from ``start`` on (default: the beginning), as ``train`` feeds
        them to ``train_step``."""
        for item in self.stream.batches(start):
            if self.windows:
                yield make_window_batch(*item, self.vocab)
            else:
                yield make_batch(item, self.vocab)

    def _prepare_output_dir(self, resume: bool) -> None:
        """Refuse to overwrite (or to resume nothing); write config.cfg."""
        checkpoint = checkpoint_path(self.output_dir)
        if checkpoint.exists() and not resume:
            raise FileExistsError(
                f"{self.output_dir} already holds a checkpoint: pass --resume to continue it, "
                "or choose a new output directory"
            )
        if resume and not checkpoint.exists():
            raise FileNotFoundError(f"--resume: no checkpoint at {checkpoint}")
        if resume and self.settings.config is not None:
            check_resumed_config(self.output_dir, self._written_config())
        if self.ctx.is_main:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            if not resume:  # a fresh run in a folder with an earlier run's curve but no checkpoint
                (self.output_dir / METRICS_NAME).unlink(missing_ok=True)
            if self.settings.config is not None:
                self._written_config().to_disk(self.output_dir / CONFIG_NAME)
        self.ctx.barrier()

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
        model = BiLMLanguageModel(bilm, softmax, s.objective.dropout, self.precision)
        return model.to(self.device)

    def _wrap_distributed(self, model: BiLMLanguageModel) -> torch.nn.Module:
        """DDP over the parameters whose gradients it averages: all of them, or without the
        softmax's when its rows are updated sparsely (``publish_row_gradients`` exchanges
        those)."""
        if not self.ctx.distributed:
            return model
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return DDP(_BiLMPart(model) if self.sparse_updates else model, device_ids)

    def _seed_rank(self) -> torch.Generator:
        """Per-rank seeds of Python, NumPy and torch; the softmax sampler's generator on sentence
        batches (window batches draw from torch's default generator, which a recorded or compiled
        step advances on the device)."""
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
        batches = self.batches(self.start_position)
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
        warned_fallbacks = False
        try:
            while self.step < t.max_steps and not self._should_stop():
                self.train_step(next(batches))
                self.step += 1
                if self.step == s.initialize.softmax_only_steps and self.ctx.is_main:
                    tqdm.write(f"Step {self.step}: softmax fitted; from now on the biLM trains too")
                bar.update(1)
                last = self.step == t.max_steps
                evaluates = bool(self.dev_files) and (self.step % t.eval_every == 0 or last)
                saves = self.step % t.checkpoint_every == 0
                if self.step % t.log_every == 0 or last or evaluates or saves:
                    window.add(*self._flush())
                if self.step % t.log_every == 0 or last:
                    record = window.flush(
                        self.step, self.tokens_seen, float(self.scheduler.get_last_lr()[0])
                    )
                    record["softmax"] = "sampled" if self.use_sampled else "full"
                    record["skipped_lines"] = self.stream.last_stats.skipped_lines
                    record["threads"] = torch.get_num_threads()
                    if self.eager_fallbacks:
                        record["eager_steps"] = self.eager_fallbacks
                        if self.ctx.is_main and not warned_fallbacks:
                            warned_fallbacks = True
                            tqdm.write(
                                f"Step {self.step}: {self.eager_fallbacks} batch(es) held more distinct "
                                f"tokens than [training] distinct_tokens ({self.static_step.distinct_rows}) "
                                "and ran eagerly; raise it for the recorded step to run them"
                            )
                        self.eager_fallbacks = 0
                    self._log(record)
                    bar.set_postfix(
                        loss=f"{record['loss']:.3f}",
                        ppl=f"{record['ppl']:.1f}",
                        tok_s=f"{record['tokens_per_s']:.0f}",
                    )
                if evaluates:
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
                if saves:
                    self.save_checkpoint()
                    window.restart_clock()
        finally:
            bar.close()
            signal.signal(signal.SIGINT, previous_handler)
        window.add(*self._flush())
        self.save_checkpoint()
        if self._should_stop() and self.step < t.max_steps:  # a stop on the last step is no stop
            raise TrainingInterrupted(
                f"interrupted at step {self.step} of {t.max_steps}: checkpoint saved in "
                f"{self.output_dir}; continue with --resume"
            )
        return self.output_dir

    def train_step(self, batch: Union[LMBatch, WindowBatch]) -> Tuple[torch.Tensor, int]:
        """One update on ``batch`` (``batches``, ``make_batch`` or ``make_window_batch``), as
        ``train`` makes them: for custom loops and benchmarks. Windows start from the states the
        previous window batch ended with. On window batches it reads nothing back from the device
        (a sentence batch's count of predictions is read): returns this
        step's summed NLL of both directions, (2,) on the device, and this process's number of
        predictions (both directions); ``train`` reads the sums every ``log_every`` steps."""
        s = self.settings
        self.model.train()
        self.model.bilm_frozen = self.step < s.initialize.softmax_only_steps
        with record_function(PHASES["batch"]):
            batch = batch.to(self.device)
        count = 2 * batch.n_targets
        if isinstance(batch, WindowBatch):
            if self.static_step is not None and self.static_step.accepts(batch):
                nll = self.static_step(batch)
            else:
                if self.static_step is not None and not self.model.bilm_frozen:
                    self.eager_fallbacks += 1  # more distinct tokens than [training] distinct_tokens
                self.optimizer.zero_grad(set_to_none=True)
                nll = self.window_update(batch)
        else:
            nll = self._sentence_update(batch, count)
        self.scheduler.step()
        self._pending.add(nll, count)
        return nll, count

    def _sentence_update(self, batch: LMBatch, count: int) -> torch.Tensor:
        s = self.settings
        normaliser = self._normaliser(count)
        n_samples = s.objective.n_negative_samples if self.use_sampled else None
        nll = self.ddp_model(batch, n_samples, self.generator)
        loss = nll.sum() / normaliser()
        self.optimizer.zero_grad(set_to_none=True)
        with record_function(PHASES["backward"]):
            self.scaler.scale(loss).backward()
            if self.sparse_updates:
                self.model.softmax.publish_row_gradients(self.ctx.gather_rows)
        self.clip_and_step()
        return nll.detach()

    def window_update(
        self,
        batch: WindowBatch,
        forward: Optional[Callable] = None,
        update: Optional[Callable] = None,
    ) -> torch.Tensor:
        """The update of one window batch, reading nothing back from the device (what
        ``static_step`` records or compiles; the caller zeroes the gradients): forward from the
        carried LSTM states, loss, backward, the states carried on in place, then ``update``
        (default ``clip_and_step``). Returns the summed NLL of both directions, (2,)."""
        s = self.settings
        if self.carried.states is None:
            self.carried.states = self.model.zero_states(batch.index.shape[1], self.device)
        n_samples = s.objective.n_negative_samples if self.use_sampled else None
        forward = self.ddp_model if forward is None else forward
        nll, states = forward(batch, n_samples, None, self.carried.states)
        # Every rank holds the same number of predictions: DDP's average is the global mean.
        loss = nll.sum() / float(2 * batch.n_targets)
        with record_function(PHASES["backward"]):
            self.scaler.scale(loss).backward()
            self.carried.update(states)  # after backward, which reads the states it began from
            if self.sparse_updates:
                self.model.softmax.publish_row_gradients(self.ctx.gather_rows)
        (self.clip_and_step if update is None else update)()
        return nll.detach()

    def clip_and_step(self) -> None:
        """Clip the gradients' global norm (``[optimizer] clip_norm``) and step the optimizer."""
        with record_function(PHASES["optimizer"]):
            if self.settings.optimizer.clip_norm:
                self.scaler.unscale_(self.optimizer)
                clip_grad_norm(self.model.parameters(), self.settings.optimizer.clip_norm)
            self.scaler.step(self.optimizer)
            self.scaler.update()

    def _normaliser(self, count: int):
        """What the summed NLL is divided by, so that DDP's average of the ranks' gradients is the
        gradient of one process holding every rank's batch: the predictions of all ranks, per
        rank. Windows: every rank has ``count``. Sentences: the ranks' counts are summed while
        the forward runs (returns a function that waits for it)."""
        if not self.ctx.distributed or self.windows:
            return lambda: float(count)
        counts = torch.tensor([float(count)], dtype=torch.float64, device=self.device)
        wait = self.ctx.all_reduce_sum_async(counts)

        def normaliser() -> torch.Tensor:
            wait()
            return (counts / self.ctx.world_size).to(torch.float32)

        return normaliser

    def _flush(self) -> Tuple[float, int]:
        """Read the NLL and counts summed on the device since the last flush, over all ranks,
        with the stop request (Ctrl-C on any rank stops every rank after this step): the one
        read back from the device every ``log_every`` steps. Returns (summed NLL, predictions)."""
        nll, count, stop = self._pending.take(self._stop_requested)
        totals = self.ctx.all_reduce_sum(torch.cat([nll, count, stop]))
        nll_sum, global_count = float(totals[0] + totals[1]), int(totals[2])
        self._stop_agreed = self._stop_agreed or bool(totals[3] > 0)
        self.tokens_seen += global_count // 2
        return nll_sum, global_count

    def _should_stop(self) -> bool:
        """Ranks stop at the same step (one that stopped alone would wait forever in the others'
        next collective), so under torchrun only the flag agreed in ``_flush`` counts."""
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
        """Write the loadable model files and the resumable training state (rank 0); steps not
        yet flushed count in ``tokens_seen`` first."""
        if self._pending.steps:
            self._flush()
        save_checkpoint(
            self.output_dir,
            self.ctx,
            self._training_state(),
            self.vocab,
            self.step,
            self.tokens_seen,
            self.stream.position,
        )

    def _initialize_from(self, bilm: BiLM, softmax: LMSoftmax) -> None:
        """Copy the weights of ``initialize.bilm`` (and its softmax, when it comes with this run's
        vocabulary) into the fresh model."""
        s = self.settings
        weights = init_weight_source(s)
        source = load_bilm_from(weights)
        if source.options != s.options:
            ours, theirs = flatten(s.options.to_dict()), flatten(source.options.to_dict())
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
    count is ``[system] threads`` during the run, and it and the TF32 switches (which "tf32"
    turns on) are restored after it."""
    settings = parse_settings(config)
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    with torch_threads(settings.system.thread_count):
        try:
            trainer = Trainer(settings, output_dir, gpu_id, resume, show_progress)
            try:
                return trainer.train()
            finally:
                trainer.ctx.shutdown()
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


class _BiLMPart(torch.nn.Module):
    """The LM as DDP sees it under sparse softmax updates: its forward is the whole model's, its
    parameters (the ones DDP averages) only the biLM's; the softmax is no submodule of it."""

    def __init__(self, model: BiLMLanguageModel) -> None:
        super().__init__()
        self.bilm = model.bilm
        self.run = model.forward  # a bound method: not registered, so its softmax is not either

    def forward(self, *args, **kwargs):
        return self.run(*args, **kwargs)


class _Pending:
    """What the steps since the last flush summed on the device, and their count on the host."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.nll = torch.zeros(2, dtype=torch.float64, device=device)
        self.count = 0
        self.steps = 0

    def add(self, nll: torch.Tensor, count: int) -> None:
        self.nll += nll
        self.count += count
        self.steps += 1

    def take(self, stop: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(nll (2,), count (1,), stop (1,)) float64 on the device; starts over."""
        extra = torch.tensor([self.count, float(stop)], dtype=torch.float64).to(self.device)
        nll = self.nll
        self.nll = torch.zeros_like(nll)
        self.count, self.steps = 0, 0
        return nll, extra[:1], extra[1:]


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


def init_weight_source(s: PretrainSettings) -> WeightSource:
    """The files of ``[initialize] bilm`` (a model directory, the name of a downloaded model,
    or an options.json with ``weight_file``)."""
    if s.initialize.weight_file is None:
        return resolve_weight_source(s.initialize.bilm, what="initialize.bilm")
    return resolve_weight_source(
        options_file=s.initialize.bilm, weight_file=s.initialize.weight_file
    )


def _corpus_files(key: str, spec: str) -> List[Path]:
    try:
        return resolve_files(spec)
    except CorpusError as err:
        raise CorpusError(f"{key}: {err}") from None
