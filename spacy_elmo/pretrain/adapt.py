"""Adapt a biLM to your own text: continued pretraining, configured from the source model (the
ELMo paper's fine-tuning of the biLM on the task's text; docs/reference/adapt.md gives the steps,
docs/results/adapt.md what they measured).

The text is split into a training part and a held-out share; a softmax is fitted to the frozen
biLM's outputs when the source has none (``softmax_fit``; its perplexity is the "before"); then
the whole biLM trains until the held-out perplexity stops falling, as an ordinary pretraining run,
so Ctrl-C and ``resume`` work as for ``pretrain`` and the output is a pretraining output directory.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Dict, Optional, Sequence, Tuple

from pydantic import Field, Strict
from tqdm import tqdm

from ..files import replacing, write_json_atomically
from ..formats.native import save_bilm
from ..nn.softmax import LMSoftmax
from ..nn.threads import command_threads, torch_threads
from ..sources import load_bilm_from, resolve_weight_source
from ..text_files import resolve_files
from ..validation import (
    NonNegativeNumber,
    PositiveNumber,
    StrictNonNegative,
    StrictPositive,
    Threads,
    at_least,
    validated,
)
from .build import trainable
from .checkpoint import checkpoint_path
from .config import CONFIGS, ConfigError, load_config, model_overrides
from .corpus import CorpusError, CorpusSettings, SequenceReader, check_text, count_words
from .early_stopping import EarlyStopping
from .evaluate import EvalResult, held_out_nll, load_language_model
from .metrics import read_metrics
from .model import BiLMLanguageModel
from .run_files import METRICS_NAME, OPTIONS_NAME, SAFETENSORS_NAME, SOFTMAX_NAME, VOCAB_NAME
from .section import Section
from .softmax_fit import FitSettings, fit_softmax, top_layer_outputs
from .trainer import TrainingInterrupted, pretrain
from .vocab import Vocab

#: Where the output directory keeps the adaptation's own files.
ADAPT_DIR = "adapt"
SOFTMAX_FIT_DIR = "softmax-fit"
SUMMARY_NAME = "summary.json"
SECONDS_NAME = "seconds.json"
#: The package's adapt recipe.
ADAPT_CONFIG = CONFIGS / "adapt.cfg"


class AdaptSettings(Section):
    """The ``[adapt]`` section of a recipe (``configs/adapt.cfg`` says what each key does)."""

    tokenized: bool
    lang: str
    seed: int
    threads: Threads
    holdout: Annotated[float, Strict(), Field(ge=0.01, le=0.5)]
    max_heldout_tokens: StrictPositive
    min_heldout_tokens: StrictPositive
    min_train_tokens: StrictPositive
    softmax_learning_rate: PositiveNumber
    softmax_weight_decay: NonNegativeNumber
    softmax_batch: StrictPositive
    softmax_passes: PositiveNumber
    softmax_min_steps: StrictPositive
    softmax_max_steps: Optional[StrictPositive]
    softmax_eval_every: StrictPositive
    learning_rate: NonNegativeNumber
    warmup_steps: StrictNonNegative
    dropout: Annotated[float, Strict(), Field(ge=0.0, le=0.9)]
    batch_tokens: StrictPositive
    passes: PositiveNumber
    min_steps: StrictPositive
    max_steps: Optional[StrictPositive]
    eval_every: StrictPositive
    patience: StrictPositive
    vocab_size: at_least(4)
    full_softmax_max_words: StrictPositive
    n_negative_samples: StrictPositive


class _AdaptConfig(Section):
    adapt: AdaptSettings


def adapt_settings(path: Optional[Path] = None, overrides: Optional[Dict[str, Any]] = None) -> AdaptSettings:
    """The ``[adapt]`` section of the recipe ``path`` (None: the package's ``configs/adapt.cfg``)
    with ``overrides`` (``{"holdout": 0.2}``: its keys), validated; a ``ConfigError`` names the
    file and every wrong key."""
    path = ADAPT_CONFIG if path is None else Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such adapt recipe (a copy of {ADAPT_CONFIG} is one)")
    config = load_config(path, {f"adapt.{key}": value for key, value in (overrides or {}).items()})
    return validated(_AdaptConfig, dict(config), f"{path}, with the options given: ", ConfigError).adapt


@dataclass
class AdaptResult:
    """What an adaptation did (``adapt/summary.json``)."""

    output_dir: str
    source: str
    train_tokens: int
    heldout_tokens: int
    #: Held-out perplexity of the source biLM (its softmax, or one fitted with it frozen) ...
    ppl_before: float
    #: ... and of the adapted one (the best evaluation, whose weights the output holds).
    ppl_after: float
    softmax_fitted: bool
    #: No evaluation of the whole biLM beat the source: the output holds the source biLM (and the
    #: softmax fitted to it), unchanged, so that an adaptation never leaves a worse biLM.
    kept_source: bool
    steps: int
    best_step: Optional[int]
    seconds: float

    @property
    def change(self) -> float:
        """The held-out perplexity's relative change (negative: lower after)."""
        return self.ppl_after / self.ppl_before - 1.0


def adapt(
    source: Optional[str],
    texts: Sequence[Path],
    output_dir: Path,
    settings: Optional[AdaptSettings] = None,
    resume: bool = False,
    echo: Callable[[str], None] = tqdm.write,
) -> AdaptResult:
    """Adapt the biLM ``source`` (a model directory, a downloaded model's name, or None: the
    bundled one) to ``texts``, writing the adapted biLM to ``output_dir``, as ``settings`` says
    (None: the package's recipe); see the module docstring. Raises CorpusError (naming the file)
    for text that cannot be used, ValueError and FileNotFoundError for a bad source or settings,
    FileExistsError for an output directory that is not this run's; a run that fails leaves no
    output directory behind (``TrainingInterrupted``: it keeps what ``--resume`` continues)."""
    settings = adapt_settings() if settings is None else settings
    output_dir = Path(output_dir)
    weights = trainable(resolve_weight_source(source, what="SOURCE"), "SOURCE")
    _check_output_dir(output_dir, resume)
    created = not output_dir.exists()
    clock = _Clock(output_dir / ADAPT_DIR, resume)
    try:
        result = _adapt(weights, texts, output_dir, settings, resume, echo)
    except TrainingInterrupted:
        clock.save()
        raise
    except BaseException:
        if resume:
            clock.save()
        else:  # nothing of a new run that failed: the directory as it was, absent or empty
            _remove_run(output_dir, created)
        raise
    result.seconds = clock.seconds
    write_json_atomically(output_dir / ADAPT_DIR / SUMMARY_NAME, asdict(result))
    return result


def _adapt(
    weights, texts: Sequence[Path], output_dir: Path, settings: AdaptSettings, resume: bool, echo: Callable[[str], None]
) -> AdaptResult:
    """``adapt``'s steps: the split, the "before" (a softmax fitted first where the source has
    none), the whole biLM; the result without its time."""
    work = output_dir / ADAPT_DIR
    train_file, heldout_file = work / "train.txt", work / "heldout.txt"
    counts = _split_once(texts, train_file, heldout_file, settings, resume)
    echo(f"Text: {counts[0]:,} tokens to train on, {counts[1]:,} held out ({heldout_file})")
    settings = step_caps(settings, counts[0])
    has_softmax = (weights.directory / SOFTMAX_NAME).is_file() and (weights.directory / VOCAB_NAME).is_file()
    if not has_softmax:
        check_softmax_cap(settings, counts[0])
    vocab_file = _vocabulary(weights, work, train_file, settings, echo)
    words = len(Vocab.load(vocab_file))
    base = _overrides(weights, train_file, heldout_file, vocab_file, words, settings)
    softmax = f"{base['objective.softmax']} softmax over {words:,} words"  # for the progress lines
    with torch_threads(command_threads(settings.threads)):
        before, start_from = _perplexity_before(
            weights, has_softmax, vocab_file, softmax, work, train_file, heldout_file, settings, resume, echo
        )
        echo(f"Adapting the whole biLM in {output_dir} ({softmax})")
        whole = {
            **base, "paths.init_bilm": str(start_from), "optimizer.schedule": "linear", "objective.dropout": settings.dropout,
            # the fitted softmax's rows of words the text never shows are equal: scored as one
            "objective.tie_unseen_rows": not has_softmax and base["objective.softmax"] == "full",
        }  # fmt: skip
        _run(whole, output_dir, resume)
    stopping = _best(output_dir, settings.patience)
    kept_source = stopping.best >= before and not has_softmax
    if kept_source:
        _keep_source(work, output_dir, before, stopping.best, echo)
    return AdaptResult(
        output_dir=str(output_dir),
        source=str(weights.directory),
        train_tokens=counts[0],
        heldout_tokens=counts[1],
        ppl_before=before,
        ppl_after=min(stopping.best, before) if kept_source else stopping.best,
        softmax_fitted=not has_softmax,
        kept_source=kept_source,
        steps=_last_step(output_dir),
        best_step=stopping.best_step,
        seconds=0.0,
    )


def _check_output_dir(output_dir: Path, resume: bool) -> None:
    """A new run goes to a new or empty directory; ``resume`` to an adaptation's own."""
    own = (output_dir / ADAPT_DIR).is_dir()
    if resume and not own:
        raise FileNotFoundError(f"{output_dir}: no adaptation to resume there (no {ADAPT_DIR}/ folder); start one without --resume")
    if not resume and own:
        raise FileExistsError(
            f"{output_dir} already holds an adaptation: pass --resume to continue its run, or choose a new output directory"
        )
    if not resume and output_dir.is_dir() and any(output_dir.iterdir()):
        raise FileExistsError(
            f"{output_dir} is not empty and holds no adaptation: choose a new or empty output directory "
            "(the adapted biLM's files go there)"
        )
    if output_dir.exists() and not output_dir.is_dir():
        raise FileExistsError(f"{output_dir} is a file: choose a new or empty output directory")


def _remove_run(output_dir: Path, created: bool) -> None:
    if created:
        shutil.rmtree(output_dir, ignore_errors=True)
        return
    for path in output_dir.iterdir():
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


class _Clock:
    """An adaptation's time over all its sessions: each session that ends early (Ctrl-C, a
    failure) adds its own to ``adapt/seconds.json``, which a resumed session starts from."""

    def __init__(self, work: Path, resume: bool) -> None:
        self.file = work / SECONDS_NAME
        self.before = json.loads(self.file.read_text(encoding="utf-8"))["seconds"] if resume and self.file.is_file() else 0.0
        self.started = time.perf_counter()

    @property
    def seconds(self) -> float:
        return self.before + time.perf_counter() - self.started

    def save(self) -> None:
        if self.file.parent.is_dir():
            write_json_atomically(self.file, {"seconds": self.seconds})


def check_softmax_cap(settings: AdaptSettings, train_tokens: int) -> None:
    """Refuse a softmax fit capped below one pass over the training text's predictions (two a
    token, one per direction): its "before" would be a softmax fitted part way, and the change
    would credit the adaptation with the rest of the fit."""
    one_pass = math.ceil(2 * train_tokens / settings.softmax_batch)
    if settings.softmax_max_steps < one_pass:
        raise ValueError(
            f"adapt.softmax_max_steps = {settings.softmax_max_steps} is too few to fit a softmax to "
            f"{train_tokens:,} training tokens: one pass over them takes {one_pass} updates of "
            f"{settings.softmax_batch:,} predictions; give at least {one_pass} (--softmax-max-steps), "
            f"or leave it unset ({settings.softmax_passes:g} passes)"
        )


def step_caps(settings: AdaptSettings, train_tokens: int) -> AdaptSettings:
    """``settings`` with both step caps set: those given kept, the others their passes over
    ``train_tokens`` in batches of ``batch_tokens``, at least their floors."""

    def steps(passes: float, floor: int, per_step: int) -> int:
        return max(floor, math.ceil(passes * train_tokens / per_step))

    return settings.model_copy(
        update={
            "max_steps": (
                steps(settings.passes, settings.min_steps, settings.batch_tokens)
                if settings.max_steps is None
                else settings.max_steps
            ),
            "softmax_max_steps": (
                steps(settings.softmax_passes, settings.softmax_min_steps, settings.softmax_batch // 2)  # 2 predictions a token
                if settings.softmax_max_steps is None
                else settings.softmax_max_steps
            ),
        }
    )


def _split_once(
    texts: Sequence[Path], train_file: Path, heldout_file: Path, settings: AdaptSettings, resume: bool
) -> Tuple[int, int]:
    """(training, held-out) tokens: the text split now, or a resumed run's split as it was."""
    if resume and train_file.is_file() and heldout_file.is_file():
        return _count_tokens(train_file), _count_tokens(heldout_file)
    return split_text(texts, train_file, heldout_file, settings)


def _vocabulary(weights, work: Path, train_file: Path, settings: AdaptSettings, echo: Callable[[str], None]) -> Path:
    """The softmax's vocabulary: the source's, or (a source without one) the text's own words."""
    vocab_file = weights.directory / VOCAB_NAME
    if vocab_file.is_file():
        return vocab_file
    vocab_file = work / VOCAB_NAME
    counted = count_words([train_file], _corpus_settings(settings))
    Vocab.from_counts(counted, settings.vocab_size, 1).save(vocab_file)
    echo(f"{weights.directory} has no vocabulary: the softmax predicts the text's own words ({vocab_file})")
    return vocab_file


def _perplexity_before(
    weights, has_softmax: bool, vocab_file: Path, softmax: str, work: Path, train_file: Path, heldout_file: Path,
    settings: AdaptSettings, resume: bool, echo: Callable[[str], None],
) -> Tuple[float, Path]:
    """The source biLM's held-out perplexity (with its own softmax, or one fitted now with the
    biLM frozen) and the directory the whole biLM's run starts from."""  # fmt: skip
    if has_softmax:
        before = held_out_perplexity(weights.directory, heldout_file, settings).ppl_average
        echo(f"Held-out perplexity of {weights.directory} with its softmax: {before:.2f}")
        return before, weights.directory
    fit_dir = work / SOFTMAX_FIT_DIR
    if not (resume and (fit_dir / SOFTMAX_NAME).is_file()):  # a finished fit is kept
        echo(f"Fitting a {softmax} to {weights.directory} (the biLM frozen) in {fit_dir}")
        _fit_softmax(weights, vocab_file, train_file, heldout_file, fit_dir, settings)
    before = _best(fit_dir, settings.patience).best
    echo(f"Held-out perplexity of the source biLM, softmax fitted: {before:.2f}")
    return before, fit_dir


def _fit_softmax(
    weights, vocab_file: Path, train_file: Path, heldout_file: Path, fit_dir: Path, settings: AdaptSettings
) -> None:
    """``softmax_fit`` on the source biLM's outputs over the split text, in ``fit_dir`` beside a
    copy of the biLM and the vocabulary (where the whole biLM's run starts); its softmax file,
    written last, marks the fit finished."""  # fmt: skip
    shutil.rmtree(fit_dir, ignore_errors=True)
    vocab = Vocab.load(vocab_file)
    bilm = load_bilm_from(weights)
    model = BiLMLanguageModel(bilm, LMSoftmax(len(vocab), bilm.options.lstm.projection_dim))
    outputs = [
        top_layer_outputs(model, vocab, SequenceReader([path], _corpus_settings(settings, tokenized=True)), settings.batch_tokens)
        for path in (train_file, heldout_file)
    ]
    save_bilm(bilm, fit_dir)
    shutil.copyfile(vocab_file, fit_dir / VOCAB_NAME)
    fit = FitSettings(
        learning_rate=settings.softmax_learning_rate,
        batch=settings.softmax_batch,
        max_steps=settings.softmax_max_steps,
        eval_every=settings.softmax_eval_every,
        patience=settings.patience,
        seed=settings.seed,
        weight_decay=settings.softmax_weight_decay,
    )
    fit_softmax(model.softmax, *outputs, fit, fit_dir)


def _keep_source(work: Path, output_dir: Path, before: float, best: float, echo: Callable[[str], None]) -> None:
    """No evaluation of the whole biLM beat the source: the output is the source with its fitted softmax."""
    for name in (OPTIONS_NAME, SAFETENSORS_NAME, SOFTMAX_NAME):
        shutil.copyfile(work / SOFTMAX_FIT_DIR / name, output_dir / name)
    echo(
        f"No evaluation of the whole biLM beat the source's {before:.2f} (best {best:.2f}): "
        f"{output_dir} holds the source biLM, unchanged, with the fitted softmax"
    )


def split_text(
    texts: Sequence[Path], train_file: Path, heldout_file: Path, settings: AdaptSettings
) -> Tuple[int, int]:
    """Read ``texts`` (files or folders of them) as the pretraining corpus reads its files (JSONL:
    the ``text`` of each object), one sentence a line, tokens separated by spaces, into
    ``train_file`` and ``heldout_file`` (a seeded ``holdout`` share of the sentences, at most
    ``max_heldout_tokens`` tokens). Every line is read before a file is written. Returns the two
    token counts; refuses too little text."""
    if not texts:
        raise CorpusError("no text given: name one or more text, .spacy or .jsonl files")
    files = [file for text in texts for file in resolve_files(text)]
    corpus = _corpus_settings(settings)
    check_text(files, corpus)
    train_file.parent.mkdir(parents=True, exist_ok=True)
    chooser = random.Random(settings.seed)
    counts = [0, 0]
    with replacing(train_file) as train_path, replacing(heldout_file) as heldout_path:
        with train_path.open("w", encoding="utf-8") as train, heldout_path.open("w", encoding="utf-8") as heldout:
            for tokens in SequenceReader(files, corpus):
                held = chooser.random() < settings.holdout and counts[1] < settings.max_heldout_tokens
                (heldout if held else train).write(" ".join(tokens) + "\n")
                counts[held] += len(tokens)
        _check_amount(counts, texts, settings)
    return counts[0], counts[1]


def _check_amount(counts: Sequence[int], texts: Sequence[Path], settings: AdaptSettings) -> None:
    """Refuse too little text; the ``--holdout`` that would give both parts enough, where one does."""
    if counts[1] >= settings.min_heldout_tokens and counts[0] >= settings.min_train_tokens:
        return
    total = sum(counts)
    share = min(0.5, math.ceil(120 * settings.min_heldout_tokens / max(total, 1)) / 100)  # a fifth above the floor
    helps = (
        counts[1] < settings.min_heldout_tokens
        and total * share >= settings.min_heldout_tokens
        and total * (1 - share) >= settings.min_train_tokens
    )
    raise CorpusError(
        f"{', '.join(map(str, texts))}: too little text to adapt on: {total:,} tokens, of which "
        f"{counts[1]:,} held out and {counts[0]:,} to train on (at least "
        f"{settings.min_heldout_tokens:,} and {settings.min_train_tokens:,} are needed). Add "
        "more text of the domain (unlabelled text counts)"
        + (f", or hold out a larger share: --holdout {share:g}" if helps and share > settings.holdout else "")
    )


def held_out_perplexity(model_dir: Path, heldout_file: Path, settings: AdaptSettings) -> EvalResult:
    """The perplexity of the LM in ``model_dir`` (biLM, softmax and vocab.txt) on the held-out
    text, read as the adaptation's runs read it."""
    model, vocab = load_language_model(model_dir)
    reader = SequenceReader([heldout_file], _corpus_settings(settings, tokenized=True))
    return EvalResult.from_sums(held_out_nll(model, vocab, reader, settings.batch_tokens), heldout_file)


def _corpus_settings(settings: AdaptSettings, tokenized: Optional[bool] = None) -> CorpusSettings:
    return CorpusSettings(tokenized=settings.tokenized if tokenized is None else tokenized, lang=settings.lang)


def _overrides(
    weights, train_file: Path, heldout_file: Path, vocab_file: Path, words: int, settings: AdaptSettings
) -> Dict[str, Any]:
    """The pretraining config of an adaptation step: the source's shape, the split text (already
    tokenized), the recipe of ``settings``."""
    from ..options import BiLMOptions

    return {
        **model_overrides(BiLMOptions.from_file(weights.options_file)),
        "paths.train": str(train_file),
        "paths.dev": str(heldout_file),
        "paths.vocab": str(vocab_file),
        "paths.init_bilm": str(weights.directory),
        "system.seed": settings.seed,
        "system.threads": settings.threads,
        "corpus.tokenized": True,
        "corpus.lang": settings.lang,
        "corpus.on_decode_error": "raise",
        "objective.softmax": "full" if words <= settings.full_softmax_max_words else "sampled",
        "objective.n_negative_samples": settings.n_negative_samples,
        "optimizer.learning_rate": settings.learning_rate,
        "optimizer.warmup_steps": settings.warmup_steps,
        "training.batch_tokens": settings.batch_tokens,
        "training.max_steps": settings.max_steps,
        "training.eval_every": settings.eval_every,
        "training.patience": settings.patience,
        "training.checkpoint_every": settings.eval_every,
        "training.log_every": min(settings.eval_every, 25),
    }


def _run(overrides: Dict[str, Any], output_dir: Path, resume: bool) -> None:
    """One pretraining run; resumed when asked to and it has a checkpoint (a finished run's
    resume returns at once)."""
    resume = resume and checkpoint_path(output_dir).exists()
    pretrain(load_config(None, overrides), output_dir, resume=resume, label="whole biLM")


def _best(run_dir: Path, patience: int) -> EarlyStopping:
    return EarlyStopping.from_metrics(patience, run_dir / METRICS_NAME)


def _last_step(run_dir: Path) -> int:
    return max(record["step"] for record in read_metrics(run_dir))


def _count_tokens(path: Path) -> int:
    with path.open(encoding="utf-8") as lines:
        return sum(len(line.split()) for line in lines)
