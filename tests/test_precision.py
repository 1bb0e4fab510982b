"""Precision modes (``spacy_elmo.nn.precision``): one definition used by inference and pretraining.

The TF32 switches are process-wide flags; ``precision_context`` sets them on every device (False
off CUDA), so a CPU run can check that a code path entered the context by reading them.
"""

from __future__ import annotations

import pytest
import torch

from conftest import make_options
from spacy_elmo import BiLMOptions, batch_to_ids
from spacy_elmo.nn.bilm import BiLM
from spacy_elmo.nn.precision import PRECISIONS, get_precision, precision_context, tf32_flags
from spacy_elmo.nn.softmax import LMSoftmax
from spacy_elmo.pretrain.model import BiLMLanguageModel, init_bilm_tf_style, make_batch
from spacy_elmo.pretrain.vocab import Vocab

SENTENCES = [["The", "cat", "sat", "."], ["A", "dog", "."]]


@pytest.fixture
def tf32_on():
    """Start with TF32 allowed (cuDNN's default), as a CUDA process would."""
    before = tf32_flags()
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def _bilm(device: torch.device = torch.device("cpu")) -> BiLM:
    torch.manual_seed(0)
    bilm = BiLM(BiLMOptions.from_dict(make_options()))
    init_bilm_tf_style(bilm)
    return bilm.to(device)


def _flags_seen_by_lstm(bilm: BiLM) -> list:
    seen = []
    bilm.forward_lstm.register_forward_hook(lambda *_: seen.append(tf32_flags()))
    return seen


def test_modes_say_what_they_need():
    fp16 = get_precision("fp16")
    assert fp16.autocast_dtype == torch.float16 and fp16.needs_grad_scaler
    assert get_precision("tf32").allow_tf32 and get_precision("tf32").autocast_dtype is None
    assert not get_precision("fp32").allow_tf32
    assert get_precision("int8").int8 and get_precision("int8").autocast_dtype is None
    assert sorted(PRECISIONS) == ["bf16", "fp16", "fp32", "int8", "tf32"]
    with pytest.raises(ValueError, match="training.precision must be one of"):
        get_precision("int4", "training.precision")


@pytest.mark.parametrize("name", ["fp32", "tf32", "bf16"])
def test_context_sets_flags_and_autocast_for_the_block_only(tf32_on, name):
    with pytest.raises(RuntimeError, match="inside"):
        with precision_context(name, torch.device("cpu")) as precision:
            # no TF32 off CUDA, whatever the mode; CUDA would get precision.allow_tf32
            assert tf32_flags() == (False, False)
            assert torch.is_autocast_enabled("cpu") == (precision.autocast_dtype is not None)
            raise RuntimeError("inside")
    assert tf32_flags() == (True, True)
    assert not torch.is_autocast_enabled("cpu")


def test_inference_fp32_turns_tf32_off(tf32_on, device):
    bilm = _bilm(device)
    seen = _flags_seen_by_lstm(bilm)
    with torch.no_grad():
        bilm(torch.from_numpy(batch_to_ids(SENTENCES)).to(device))
    assert seen == [(False, False)]
    assert tf32_flags() == (True, True)


def test_pretraining_fp32_turns_tf32_off(tf32_on, device):
    """The pretraining model runs the biLM under the same precision context as inference (it
    once wired the LSTMs itself and left cuDNN's TF32 on in "fp32")."""
    bilm = _bilm(device)
    seen = _flags_seen_by_lstm(bilm)
    vocab = Vocab.from_counts({w: 1 for s in SENTENCES for w in s}, 100, 1)
    model = BiLMLanguageModel(bilm, LMSoftmax(len(vocab), 6), precision="fp32").to(device)
    model(make_batch(SENTENCES, vocab).to(device)).sum().backward()
    assert seen == [(False, False)]


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
