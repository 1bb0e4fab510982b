"""The pretraining loop: batches -> loss -> clipped update, then as due a log line, an
evaluation and a checkpoint, each a method of its own.

What the run is built from is ``build.py``; what it measures, ``metrics.py``; Ctrl-C,
``stop.py``; the checkpoint's format, ``checkpoint.py``. The output directory (``run_files.py``
names its files) is loadable by ``load_bilm(output_dir)`` and the ``elmo`` pipe at any time after
the first checkpoint.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Dict, Iterator, Optional, Tuple, Union

import torch
from confection import Config
from torch.profiler import record_function
from tqdm import tqdm

from ..distributed import DistributedContext
from ..nn.precision import get_precision, training_precision
from ..nn.threads import torch_threads
from .build import (
    build_model,
    corpus_files,
    prepare_output_dir,
    prepare_vocab,
    seed_rank,
    wrap_distributed,
)
from .checkpoint import CarriedStates, TrainingState, drop_metrics_after, load_checkpoint, save_checkpoint
from .config import ConfigError, PretrainSettings, parse_settings, sampled_softmax_wanted, sparse_updates_wanted
from .corpus import BatchStream, DataPosition, SequenceReader, WindowStream, count_words
from .early_stopping import EarlyStopping
from .evaluate import EvalResult, held_out_nll
from .metrics import LogWindow, MetricsLog, PendingSums
from .model import PHASES, LMBatch, make_batch, make_window_batch
from .optimizers import adagrad_rows, clip_grad_norm, make_optimizer, make_scheduler
from .static_step import StaticStep, resolve_step_kind
from .stop import StopRequest


class TrainingInterrupted(Exception):
    """Ctrl-C stopped the run after a step; its checkpoint is saved and ``--resume`` continues it."""


class Trainer:
    """Owns the model, optimizer, data stream and output directory of one pretraining run."""

    #: The latest held-out perplexity (average of both directions) and training figures, shown
    #: on the progress bar.
    dev_ppl: Optional[float] = None

    def __init__(
        self,
        settings: PretrainSettings,
        output_dir: Path,
        gpu_id: int = -1,
        resume: bool = False,
        show_progress: bool = True,
        label: str = "pretrain",
    ) -> None:
        """``settings``: a config parsed by ``config.parse_settings``; ``label`` names the run on
        its progress bar. Sets torch's CPU thread count to ``[system] threads`` for this process
        (``pretrain`` restores it)."""
        if not isinstance(settings, PretrainSettings):
            raise TypeError(
                f"Trainer takes PretrainSettings (config.parse_settings(config)), got {type(settings).__name__}"
            )
        s = self.settings = settings
        torch.set_num_threads(s.system.thread_count)
        self.output_dir = Path(output_dir)
        self.ctx = DistributedContext.from_env(gpu_id)
        self.device = self.ctx.device
        self.show_progress = show_progress and self.ctx.is_main
        self.label = label
        self._shown: Dict[str, str] = {}
        self.step = 0
        self.tokens_seen = 0
        #: Training time of the sessions before this one (a resumed run's), and when this one began.
        self.seconds_before = 0.0
        self.started = time.perf_counter()
        self.stop = StopRequest(self.ctx.distributed, speak=self.ctx.is_main)
        self._check_single_process_options()
        prepare_output_dir(self.output_dir, s, self.ctx, resume)
        self._open_corpus()
        self.vocab = prepare_vocab(self.output_dir, s, self.train_files, self.ctx, resume)
        self.use_sampled = sampled_softmax_wanted(s.objective, len(self.vocab))
        #: The model's mode ("tf32" trains as "fp32" in a process with TF32 on).
        self.precision = training_precision(s.training.precision, self.device)
        self.step_kind = resolve_step_kind(s.training.step, self.windows, self.device, s.training.precision)
        self.sparse_updates = sparse_updates_wanted(s, self.use_sampled, self.step_kind)
        self._build_training_objects(resume)
        self.metrics = MetricsLog(self.output_dir, self.ctx.is_main)
        self.start_position = DataPosition()
        if resume:
            self._resume()
        if s.objective.tie_unseen_rows:
            self._tie_unseen_rows()
        self.early_stopping = self._early_stopping()

    def _check_single_process_options(self) -> None:
        softmax_only = self.settings.initialize.softmax_only_steps
        if softmax_only and self.ctx.world_size > 1:
            raise ConfigError(
                f"[initialize] softmax_only_steps = {softmax_only} runs in one process only (this "
                f"run has {self.ctx.world_size}): fit the softmax in a short single-process run, "
                "then continue from its output directory with torchrun"
            )

    def _open_corpus(self) -> None:
        s = self.settings
        self.train_files = corpus_files("corpus.train", s.corpus.train, s.corpus, self.ctx.is_main)
        self.dev_files = corpus_files("corpus.dev", s.corpus.dev, s.corpus, self.ctx.is_main) if s.corpus.dev else []

    def _build_training_objects(self, resume: bool) -> None:
        """The model, its DDP wrapper, optimizer, schedule, grad scaler, seeds, data stream and
        (for a recorded or compiled step) the static step."""
        s = self.settings
        model = build_model(
            s, self.vocab, self.precision, self.sparse_updates, initialize=not resume, speak=self.ctx.is_main,
            device=self.device, step_kind=self.step_kind,
        )
        self.model = model.to(self.device)
        self.ddp_model = wrap_distributed(self.model, self.ctx, self.sparse_updates)
        graphed = self.step_kind != "eager" and self.device.type == "cuda"
        self.optimizer = make_optimizer(self.model, s.optimizer, self.device if graphed else None)
        self.scheduler = make_scheduler(self.optimizer, s.optimizer, s.training.max_steps)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=get_precision(self.precision).needs_grad_scaler)
        #: The sampled softmax's weight stepped on the rows its losses read (``adagrad_rows``):
        #: its dense gradient is zero elsewhere, and Adagrad without weight decay leaves such rows
        #: as they are. One process (DDP's average holds every rank's rows), no loss scaler, and a
        #: step that is not compiled (the rows are kept in a Python list).
        self.softmax_rows = (
            self.use_sampled and not self.sparse_updates and s.optimizer.name == "adagrad"
            and not s.optimizer.weight_decay and not self.ctx.distributed and not self.scaler.is_enabled()
            and self.step_kind in ("eager", "cuda_graph")
        )  # fmt: skip
        self.model.softmax.record_rows = self.softmax_rows
        self.generator = seed_rank(s.system.seed, self.ctx.rank, self.device)
        self.stream = self._make_stream()
        self.carried = CarriedStates()
        self._pending = PendingSums(self.device)
        self.static_step = None
        #: Window batches a static step could not take since the last log record.
        self.eager_fallbacks = 0
        self._warned_fallbacks = False
        if self.step_kind != "eager":
            windows = s.training.batch_tokens // s.corpus.window_length * s.corpus.window_length
            self.static_step = StaticStep(self, self.step_kind, s.training.distinct_tokens or windows)

    def _resume(self) -> None:
        self.step, self.tokens_seen, self.start_position, self.seconds_before = load_checkpoint(
            self.output_dir, self.ctx, self._training_state(), self.vocab
        )
        if self.ctx.is_main:
            drop_metrics_after(self.output_dir, self.step)

    def _tie_unseen_rows(self) -> None:
        """``[objective] tie_unseen_rows``: the softmax scores the rows of the words the training
        text never shows as one (``LMSoftmax.tie_rows``, which checks that they are equal)."""
        if self.use_sampled:
            raise ConfigError("[objective] tie_unseen_rows = true needs the full softmax ([objective] softmax)")
        counts = count_words(self.train_files, self.settings.corpus)
        seen = torch.zeros(len(self.vocab), dtype=torch.bool)
        seen[self.vocab.encode(list(counts))] = True  # with <S> and </S>, which are targets too
        try:
            self.model.softmax.tie_rows((~seen).nonzero().squeeze(1))
        except ValueError as err:
            raise ConfigError(f"[objective] tie_unseen_rows: {err} (a softmax fitted by adapt has them equal)") from None

    def _early_stopping(self) -> Optional[EarlyStopping]:
        """``[training] patience``'s state, rebuilt from the run's evaluations on a resume."""
        patience = self.settings.training.patience
        if patience is None:
            return None
        if not self.dev_files:
            raise ConfigError("[training] patience stops on held-out perplexity: set corpus.dev (paths.dev)")
        return EarlyStopping.from_metrics(patience, self.metrics.path)

    @property
    def seconds(self) -> float:
        """The run's time so far, every session's (what its records and checkpoints keep)."""
        return self.seconds_before + time.perf_counter() - self.started

    def _training_state(self) -> TrainingState:
        return TrainingState(self.model, self.optimizer, self.scheduler, self.scaler, self.generator, self.carried)

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

    def batches(self, start: Optional[DataPosition] = None) -> Iterator[LMBatch]:
        """The training batches from ``start`` on (default: the beginning), as ``train`` feeds
        them to ``train_step``."""
        for item in self.stream.batches(start):
            if self.windows:
                yield make_window_batch(*item, self.vocab)
            else:
                yield make_batch(item, self.vocab)

    # ----------------------------------------------------------------------------- the loop
    def train(self) -> Path:
        """Run until ``training.max_steps``; returns the output directory."""
        max_steps = self.settings.training.max_steps
        batches = self.batches(self.start_position)
        bar = tqdm(
            total=max_steps,
            initial=self.step,
            disable=not self.show_progress,
            unit="step",
            desc=self.label,
            dynamic_ncols=True,
        )
        window = LogWindow()
        try:
            with self.stop.handling_ctrl_c():
                while self.step < max_steps and not self.stop.stop and not self._stopped_early():
                    self.train_step(next(batches))
                    self.step += 1
                    bar.update(1)
                    self._after_step(window, bar)
        finally:
            bar.close()
        window.add(*self._flush())
        self.save_checkpoint(model_files=self._keeps_model_files())
        if self.stop.stop and self.step < max_steps:  # a stop on the last step is no stop
            raise TrainingInterrupted(
                f"interrupted at step {self.step} of {max_steps}: checkpoint saved in "
                f"{self.output_dir}; continue with --resume"
            )
        return self.output_dir

    def _after_step(self, window: LogWindow, bar: tqdm) -> None:
        """What is due after this step: a log line, an evaluation, a checkpoint (each reads the
        device's sums first, which is what lets a Ctrl-C on any rank stop every rank)."""
        t = self.settings.training
        if self.step == self.settings.initialize.softmax_only_steps and self.ctx.is_main:
            tqdm.write(f"Step {self.step}: softmax fitted; from now on the biLM trains too")
        last = self.step == t.max_steps
        logs = self.step % t.log_every == 0 or last
        evaluates = bool(self.dev_files) and (self.step % t.eval_every == 0 or last)
        saves = self.step % t.checkpoint_every == 0
        if logs or evaluates or saves:
            window.add(*self._flush())
        if logs:
            self._log_training(window, bar)
        if evaluates:
            result = self._log_evaluation()
            self._show(bar)  # the evaluation just made
            if self.early_stopping is not None:
                self._keep_if_best(result)
                saves = False  # just saved
            window.restart_clock()
        if saves:
            self.save_checkpoint(model_files=self._keeps_model_files())
            window.restart_clock()

    def _log_training(self, window: LogWindow, bar: tqdm) -> None:
        record = window.flush(self.step, self.tokens_seen, float(self.scheduler.get_last_lr()[0]))
        record["seconds"] = self.seconds
        record["softmax"] = "sampled" if self.use_sampled else "full"
        record["skipped_lines"] = self.stream.last_stats.skipped_lines
        record["threads"] = torch.get_num_threads()
        if self.eager_fallbacks:
            record["eager_steps"] = self.eager_fallbacks
            self._warn_fallbacks()
            self.eager_fallbacks = 0
        self.metrics.write(record)
        self._shown = {"loss": f"{record['loss']:.3f}", "ppl": f"{record['ppl']:.1f}", "tok_s": f"{record['tokens_per_s']:.0f}"}
        self._show(bar)

    def _show(self, bar: tqdm) -> None:
        """The latest training figures and held-out perplexity on the progress bar."""
        held_out = {} if self.dev_ppl is None else {"dev_ppl": f"{self.dev_ppl:.1f}"}
        bar.set_postfix({**self._shown, **held_out})

    def _warn_fallbacks(self) -> None:
        if self.ctx.is_main and not self._warned_fallbacks:
            self._warned_fallbacks = True
            tqdm.write(
                f"Step {self.step}: {self.eager_fallbacks} batch(es) held more distinct tokens than "
                f"[training] distinct_tokens ({self.static_step.distinct_rows}) and ran eagerly; "
                "raise it for the recorded step to run them"
            )

    def _log_evaluation(self) -> EvalResult:
        result = self.evaluate()
        self.metrics.write(
            {
                "step": self.step,
                "seconds": self.seconds,
                "dev_tokens": result.tokens,
                "dev_ppl_forward": result.ppl_forward,
                "dev_ppl_backward": result.ppl_backward,
                "dev_ppl": result.ppl_average,
            }
        )
        self.dev_ppl = result.ppl_average
        if self.ctx.is_main and self.show_progress:
            tqdm.write(
                f"Step {self.step}: held-out perplexity {result.ppl_average:.2f} (forward "
                f"{result.ppl_forward:.2f}, backward {result.ppl_backward:.2f})"
            )
        return result

    # ----------------------------------------------------------------------------- one step
    def train_step(self, batch: LMBatch) -> Tuple[torch.Tensor, int]:
        """One update on ``batch`` (``batches``, ``make_batch`` or ``make_window_batch``), as
        ``train`` makes them: for custom loops and benchmarks. Windows start from the states the
        previous window batch ended with. On window batches it reads nothing back from the device
        (a sentence batch's count of predictions is read): returns this step's summed NLL of both
        directions, (2,) on the device, and this process's number of predictions (both
        directions); ``train`` reads the sums every ``log_every`` steps."""
        self.model.train()
        self.model.bilm_frozen = self.step < self.settings.initialize.softmax_only_steps
        self.model.softmax.forget_used_rows()  # this step's update steps this step's rows only
        with record_function(PHASES["batch"]):
            batch = batch.to(self.device)
        count = 2 * batch.n_targets
        if batch.windows:
            nll = self._window_step(batch)
        else:
            nll = self._sentence_update(batch, count)
        self.scheduler.step()
        self._pending.add(nll, count)
        return nll, count

    def _window_step(self, batch: LMBatch) -> torch.Tensor:
        if self.static_step is not None and self.static_step.accepts(batch):
            return self.static_step(batch)
        if self.static_step is not None and not self.model.bilm_frozen:
            self.eager_fallbacks += 1  # more distinct tokens than [training] distinct_tokens
        self.optimizer.zero_grad(set_to_none=True)
        return self.window_update(batch)

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
        batch: LMBatch,
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
            weight = self.model.softmax.weight
            rows = self.model.softmax.take_used_rows()  # None unless softmax_rows
            if rows is None or weight.grad is None:
                self.scaler.step(self.optimizer)
            else:
                grad, weight.grad = weight.grad, None  # the optimizer skips a parameter without one
                self.scaler.step(self.optimizer)
                weight.grad = grad
                adagrad_rows(self.optimizer, weight, rows)
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
        nll, count, stop = self._pending.take(self.stop.requested)
        totals = self.ctx.all_reduce_sum(torch.cat([nll, count, stop]))
        nll_sum, global_count = float(totals[0] + totals[1]), int(totals[2])
        self.stop.agree(bool(totals[3] > 0))
        self.tokens_seen += global_count // 2
        return nll_sum, global_count

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
    def save_checkpoint(self, model_files: bool = True) -> None:
        """Write the loadable model files (unless ``model_files`` is false) and the resumable
        training state (rank 0); steps not yet flushed count in ``tokens_seen`` first."""
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
            model_files,
            self.seconds,
        )

    # ----------------------------------------------------------------------------- early stopping
    def _keep_if_best(self, result: EvalResult) -> None:
        """After an evaluation under ``[training] patience``: a checkpoint that writes the model
        files only when the evaluation is the best so far; the stop, logged, when patience runs out."""
        best = self.early_stopping.update(self.step, result.ppl_average)
        self.save_checkpoint(model_files=best)
        if self.early_stopping.exhausted:
            self.metrics.write({**self.early_stopping.record(self.step), "seconds": self.seconds})
            if self.ctx.is_main:
                tqdm.write(self.early_stopping.message(self.step))

    def _keeps_model_files(self) -> bool:
        """Whether a checkpoint outside an evaluation writes the model files: always, except
        under early stopping once an evaluation has written the best ones."""
        return self.early_stopping is None or self.early_stopping.best_step is None

    def _stopped_early(self) -> bool:
        return self.early_stopping is not None and self.early_stopping.exhausted


def pretrain(
    config: Config,
    output_dir: Path,
    gpu_id: int = -1,
    resume: bool = False,
    show_progress: bool = True,
    label: str = "pretrain",
) -> Path:
    """Train a biLM as ``config`` says, writing everything to ``output_dir`` (``label`` names it
    on the progress bar); torch's CPU thread count is ``[system] threads`` during the run, and it
    and the TF32 switches (which "tf32" turns on) are restored after it."""
    settings = parse_settings(config)
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    with torch_threads(settings.system.thread_count):
        try:
            trainer = Trainer(settings, output_dir, gpu_id, resume, show_progress, label)
            try:
                return trainer.train()
            finally:
                trainer.ctx.shutdown()
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
