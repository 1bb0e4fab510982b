"""Precision modes (``spacy_elmo.nn.precision``): one definition used by inference and pretraining,
carried by the model and the calling thread, never by process-wide switches."""

from __future__ import annotations

import pytest
import torch

from conftest import make_options, run_in_threads
from spacy_elmo import BiLMOptions, BiLMRunner, batch_to_ids
from spacy_elmo.nn.bilm import BiLM
from spacy_elmo.nn.precision import PRECISIONS, get_precision, precision_context
from spacy_elmo.nn.softmax import LMSoftmax
from spacy_elmo.pretrain.model import BiLMLanguageModel, init_bilm_tf_style, make_batch
from spacy_elmo.pretrain.vocab import Vocab

SENTENCES = [["The", "cat", "sat", "."], ["A", "dog", "."]]


def _flags() -> tuple:
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


@pytest.fixture
def user_flags():
    """The TF32 flags set the way a user might (matrix products on, cuDNN off), and put back."""
    before = _flags()
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = True, False
    yield True, False
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def _bilm(device: torch.device = torch.device("cpu")) -> BiLM:
    torch.manual_seed(0)
    bilm = BiLM(BiLMOptions.from_dict(make_options()))
    init_bilm_tf_style(bilm)
    return bilm.to(device)


def _flags_seen_by_lstm(bilm: BiLM) -> list:
    seen = []
    bilm.forward_lstm.register_forward_hook(lambda *_: seen.append(_flags()))
    return seen


def test_modes_say_what_they_need():
    fp16 = get_precision("fp16")
    assert fp16.autocast_dtype == torch.float16 and fp16.needs_grad_scaler
    assert get_precision("fp32").autocast_dtype is None and not get_precision("fp32").int8
    assert get_precision("int8").int8 and get_precision("int8").autocast_dtype is None
    assert sorted(PRECISIONS) == ["bf16", "fp16", "fp32", "int8"]
    with pytest.raises(ValueError, match="training.precision must be one of"):
        get_precision("int4", "training.precision")
    with pytest.raises(ValueError, match="TF32 is a process-wide PyTorch setting.*use 'fp32' and set torch.backends.cuda.matmul.allow_tf32"):
        get_precision("tf32")


@pytest.mark.parametrize("name", ["fp32", "bf16", "int8"])
def test_context_is_autocast_or_int8_for_the_block_and_writes_no_flag(user_flags, name):
    from spacy_elmo.nn.int8 import int8_wanted

    weight = torch.zeros(1)
    with pytest.raises(RuntimeError, match="inside"):
        with precision_context(name, torch.device("cpu")) as precision:
            assert _flags() == user_flags
            assert torch.is_autocast_enabled("cpu") == (precision.autocast_dtype is not None)
            assert int8_wanted(weight) == precision.int8
            raise RuntimeError("inside")
    assert _flags() == user_flags and not torch.is_autocast_enabled("cpu") and not int8_wanted(weight)


def test_the_context_belongs_to_its_thread():
    """Autocast is entered in one thread; another thread, running at the same time, is not under
    it (what lets a pipe run bf16 beside your own float32 code)."""
    import threading

    entered, checked = threading.Event(), threading.Event()

    def inside():
        with precision_context("bf16", torch.device("cpu")):
            entered.set()
            assert checked.wait(60)
            return torch.is_autocast_enabled("cpu")

    def outside():
        assert entered.wait(60)
        try:
            return torch.is_autocast_enabled("cpu")
        finally:
            checked.set()

    assert run_in_threads(lambda work: work(), [inside, outside], n_threads=2, deadline_s=120) == [True, False]


def test_inference_sees_the_callers_flags(user_flags, device):
    """The runner writes no TF32 flag: its LSTMs run under the caller's (on CUDA, "fp32" is exact
    where the caller forbids TF32; docs/reference/config.md)."""
    runner = BiLMRunner(_bilm(device))
    seen = _flags_seen_by_lstm(runner.bilm)
    with torch.no_grad():
        runner(torch.from_numpy(batch_to_ids(SENTENCES)).to(device))
    assert seen == [user_flags] and _flags() == user_flags


def test_pretraining_sees_the_callers_flags(user_flags, device):
    """The pretraining model enters the same precision context as inference, and no flag."""
    bilm = _bilm(device)
    seen = _flags_seen_by_lstm(bilm)
    vocab = Vocab.from_counts({w: 1 for s in SENTENCES for w in s}, 100, 1)
    model = BiLMLanguageModel(bilm, LMSoftmax(len(vocab), 6), precision="fp32").to(device)
    model(make_batch(SENTENCES, vocab).to(device)).sum().backward()
    assert seen == [user_flags] and _flags() == user_flags


def test_pretraining_bf16_runs_the_biLM_under_autocast():
    bilm = _bilm()
    vocab = Vocab.from_counts({w: 1 for s in SENTENCES for w in s}, 100, 1)
    seen = []
    bilm.forward_lstm.register_forward_hook(
        lambda *_: seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
    )
    BiLMLanguageModel(bilm, LMSoftmax(len(vocab), 6), precision="bf16")(make_batch(SENTENCES, vocab))
    assert seen == [(True, torch.bfloat16)]


def test_pretraining_reads_the_same_forward_lstm_as_inference():
    """The forward LM's top layer in pretraining is the biLM's own top forward layer at
    inference (same sentence, no dropout): one forward pass, two users."""
    bilm = _bilm().eval()
    captured = []
    bilm.forward_lstm.register_forward_hook(lambda m, i, out: captured.append(out[0][-1].detach()))
    vocab = Vocab.from_counts({w: 1 for s in SENTENCES for w in s}, 100, 1)
    model = BiLMLanguageModel(bilm, LMSoftmax(len(vocab), 6), precision="fp32").eval()
    with torch.no_grad():
        model(make_batch(SENTENCES, vocab))
        layers, mask = bilm(torch.from_numpy(batch_to_ids(SENTENCES)))
    pretraining_top, inference_top = captured
    for row, sentence in enumerate(SENTENCES):
        n = len(sentence)
        torch.testing.assert_close(
            pretraining_top[row, 1 : n + 1], layers[-1, row, :n, :6], rtol=0, atol=1e-6
        )
