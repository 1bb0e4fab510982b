"""What a pretraining run is built from: its output folder, corpus files, vocabulary, model
(fresh in bilm-tf's initialisation, or from ``[initialize] bilm``), DDP wrapper and seeds."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Dict, List

import numpy as np
import torch
from safetensors.torch import load_file
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from ..distributed import DistributedContext
from ..formats.manylangs import NAME as MANYLANGS
from ..nn.bilm import BiLM
from ..nn.softmax import LMSoftmax
from ..sources import WeightSource, load_bilm_from, resolve_weight_source
from ..text_files import resolve_files
from .checkpoint import checkpoint_path
from .config import ConfigError, PretrainSettings, TrainingSettings, flatten
from .corpus import CorpusError, CorpusSettings, SequenceReader, check_text, count_words
from .model import BiLMLanguageModel, init_bilm_tf_style
from .resume import check_resumed_config
from .run_files import CONFIG_NAME, METRICS_NAME, SOFTMAX_NAME, VOCAB_NAME
from .vocab import Vocab


def prepare_output_dir(output_dir: Path, settings: PretrainSettings, ctx: DistributedContext, resume: bool) -> None:
    """Refuse to overwrite a run (or to resume nothing); write config.cfg."""
    checkpoint = checkpoint_path(output_dir)
    if checkpoint.exists() and not resume:
        raise FileExistsError(
            f"{output_dir} already holds a checkpoint: pass --resume to continue it, "
            "or choose a new output directory"
        )
    if resume and not checkpoint.exists():
        raise FileNotFoundError(f"--resume: no checkpoint at {checkpoint}")
    if resume and settings.config is not None:
        check_resumed_config(output_dir, settings.written_config())
    if ctx.is_main:
        output_dir.mkdir(parents=True, exist_ok=True)
        if not resume:  # a fresh run in a folder with an earlier run's curve but no checkpoint
            (output_dir / METRICS_NAME).unlink(missing_ok=True)
        if settings.config is not None:
            settings.written_config().to_disk(output_dir / CONFIG_NAME)
    ctx.barrier()


def corpus_files(key: str, spec: str, settings: CorpusSettings, speak: bool) -> List[Path]:
    """The files ``spec`` names (files, folders, globs; a missing one names the config key), every
    line read once now (``check_text``), so that a bad line or a text without tokens stops the run
    before it starts, not at the first evaluation; lines skipped as not UTF-8 are said on the
    console (``speak``)."""
    try:
        files = resolve_files(spec)
    except FileNotFoundError as err:
        raise FileNotFoundError(f"{key}: {err}") from None
    skipped = check_text(files, settings)
    if next(iter(SequenceReader(files, settings)), None) is None:
        raise CorpusError(f"{key} {spec} holds no tokens (empty or blank lines only, or every line skipped)")
    if skipped and speak:
        tqdm.write(
            f"{key}: skipping {len(skipped):,} line{'s' if len(skipped) > 1 else ''} not UTF-8 (corpus.on_decode_error "
            f"= \"skip\"): {'; '.join(skipped[:3])}{' ...' if len(skipped) > 3 else ''}"
        )
    return files


def prepare_vocab(
    output_dir: Path, settings: PretrainSettings, train_files: List[Path], ctx: DistributedContext, resume: bool
) -> Vocab:
    """The run's vocabulary: the resumed run's, ``[vocab] path``, or counted on the training
    corpus by rank 0; written to the output folder for every rank to read."""
    s = settings
    target = output_dir / VOCAB_NAME
    if resume:
        return Vocab.load(target)
    if s.vocab.path:
        vocab = Vocab.load(s.vocab.path)
    elif ctx.is_main:
        vocab = Vocab.from_counts(count_words(train_files, s.corpus), s.vocab.size, s.vocab.min_count)
    else:
        vocab = None
    if ctx.is_main:
        vocab.save(target)
    ctx.barrier()
    return vocab if vocab is not None else Vocab.load(target)


def build_model(
    settings: PretrainSettings,
    vocab: Vocab,
    precision: str,
    sparse_updates: bool,
    initialize: bool,
    speak: bool,
    device: torch.device,
    step_kind: str,
) -> BiLMLanguageModel:
    """The biLM (bilm-tf initialisation, or ``[initialize] bilm`` when ``initialize``) and the
    softmax, on the CPU, running its LSTM as ``[training]`` says for ``device`` and the resolved
    ``step_kind``."""
    s = settings
    torch.manual_seed(s.system.seed)
    bilm = BiLM(s.options)
    init_bilm_tf_style(bilm)
    softmax = LMSoftmax(len(vocab), s.options.lstm.projection_dim)
    if initialize and s.initialize.bilm:
        initialize_from(s, vocab, bilm, softmax, speak)
    if sparse_updates:
        softmax.row_sparse_gradients = True
        # Say so explicitly (the default), which also silences torch's warning about it.
        torch.sparse.check_sparse_tensor_invariants.disable()
    return BiLMLanguageModel(
        bilm, softmax, s.objective.dropout, precision, **lstm_step_settings(s.training, device, step_kind)
    )


def lstm_step_settings(training: TrainingSettings, device: torch.device, step_kind: str) -> Dict[str, bool]:
    """``[training]`` ``directions_on_streams``, ``lstm_wavefront`` and ``fused_cell`` for
    ``device`` and ``step_kind`` (resolved): "auto" is on for an eager or recorded step on CUDA,
    where they run faster, and off on the CPU, which they do not speed up, and in a compiled step,
    which fuses the cell and traces one stream itself."""
    auto = device.type == "cuda" and step_kind in ("eager", "cuda_graph")
    values = {name: getattr(training, name) for name in ("directions_on_streams", "lstm_wavefront", "fused_cell")}
    return {name: auto if value == "auto" else value for name, value in values.items()}


def initialize_from(s: PretrainSettings, vocab: Vocab, bilm: BiLM, softmax: LMSoftmax, speak: bool) -> None:
    """Copy the weights of ``initialize.bilm`` (and its softmax, when it comes with this run's
    vocabulary) into the fresh model."""
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
        softmax_file.is_file() and vocab_file.is_file() and Vocab.load(vocab_file).words == vocab.words
    )
    if with_softmax:
        softmax.load_state_dict(load_file(str(softmax_file)))
    if speak:
        tqdm.write(
            f"Initialized the biLM from {s.initialize.bilm}"
            + (" and its softmax" if with_softmax else "; the softmax starts fresh")
        )


def init_weight_source(s: PretrainSettings) -> WeightSource:
    """The files of ``[initialize] bilm`` (a model directory, the name of a downloaded model,
    or an options.json with ``weight_file``)."""
    if s.initialize.weight_file is None:
        weights = resolve_weight_source(s.initialize.bilm, what="initialize.bilm")
    else:
        weights = resolve_weight_source(options_file=s.initialize.bilm, weight_file=s.initialize.weight_file)
    return trainable(weights, "initialize.bilm")


def trainable(weights: WeightSource, what: str) -> WeightSource:
    """``weights`` if pretraining can continue them. An ELMoForManyLangs model encodes tokens
    through its own word and character lexicons, and pretraining feeds UTF-8 bytes."""
    if weights.format == MANYLANGS:
        raise ValueError(
            f"{what} {weights.directory}: an ELMoForManyLangs model, whose tokens go through its own "
            "word and character lexicons; pretraining and adapt feed UTF-8 bytes and cannot continue "
            "it. Start from a bilm-tf format model or a pretraining output (python -m spacy_elmo "
            "list), or pretrain one on your language's text (python -m spacy_elmo pretrain)"
        )
    return weights


def wrap_distributed(model: BiLMLanguageModel, ctx: DistributedContext, sparse_updates: bool) -> torch.nn.Module:
    """DDP over the parameters whose gradients it averages: all of them, or without the
    softmax's when its rows are updated sparsely (``publish_row_gradients`` exchanges those)."""
    if not ctx.distributed:
        return model
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return DDP(BiLMPart(model) if sparse_updates else model, device_ids)


class BiLMPart(torch.nn.Module):
    """The LM as DDP sees it under sparse softmax updates: its forward is the whole model's, its
    parameters (the ones DDP averages) only the biLM's; the softmax is no submodule of it."""

    def __init__(self, model: BiLMLanguageModel) -> None:
        super().__init__()
        self.bilm = model.bilm
        self.run = model.forward  # a bound method: not registered, so its softmax is not either

    def forward(self, *args, **kwargs):
        return self.run(*args, **kwargs)


def seed_rank(seed: int, rank: int, device: torch.device) -> torch.Generator:
    """Per-rank seeds of Python, NumPy and torch; the softmax sampler's generator on sentence
    batches (window batches draw from torch's default generator, which a recorded or compiled
    step advances on the device)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed * 1000 + rank)
    random.seed(seed + rank)
    np.random.seed(seed + rank)
    torch.manual_seed(seed * 1000 + rank + 1)
    return generator
