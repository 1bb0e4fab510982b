"""The softmax fitted to a frozen biLM (``spacy_elmo.pretrain.softmax_fit``): the biLM's outputs
once, the softmax alone trained on them."""

from __future__ import annotations

import shutil

import pytest
import torch

from conftest import FIXTURES, TINY_BILM
from spacy_elmo.nn.softmax import LMSoftmax
from spacy_elmo.pretrain import load_config, pretrain
from spacy_elmo.pretrain.config import ConfigError
from spacy_elmo.pretrain.corpus import CorpusSettings, SequenceReader
from spacy_elmo.pretrain.evaluate import EvalResult, held_out_nll, load_language_model
from spacy_elmo.pretrain.metrics import read_metrics
from spacy_elmo.pretrain.softmax_fit import FitSettings, Predictions, fit_softmax, held_out, top_layer_outputs

WIKITEXT = FIXTURES / "wikitext_tiny"


def _predictions(n: int, vocab: int, dim: int, seed: int) -> Predictions:
    """Features and the words a fixed random softmax draws from them (words 40 and up never)."""
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, dim, generator=generator)
    teacher = torch.randn(40, dim, generator=torch.Generator().manual_seed(99))
    targets = torch.multinomial(torch.softmax(hidden @ teacher.T, dim=1), 1, generator=generator).squeeze(1)
    backward = torch.arange(n) >= n // 2
    return Predictions(hidden, targets, backward)


#: Long enough for later evaluations to be worse than the best.
SETTINGS = FitSettings(learning_rate=0.1, batch=64, max_steps=200, eval_every=10, patience=3, seed=0)


def test_the_fit_beats_its_zero_start_keeps_its_best_and_is_seeded(tmp_path):
    """From zero (step 0's evaluation: every word equally likely) the held-out perplexity falls;
    the softmax kept (and written) is the best evaluation's; the bias stays at zero and the rows
    of the words never seen stay equal; the same seed gives the same bytes."""
    train, heldout = _predictions(300, 60, 8, seed=1), _predictions(400, 60, 8, seed=2)  # a fit that overfits
    runs = []
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        softmax = LMSoftmax(60, 8)
        stopping = fit_softmax(softmax, train, heldout, SETTINGS, tmp_path / run, show_progress=False)
        runs.append((tmp_path / run / "softmax.safetensors").read_bytes())
    evaluations = [r for r in read_metrics(tmp_path / "a") if "dev_ppl" in r]
    assert evaluations[0]["step"] == 0 and evaluations[0]["dev_ppl"] == pytest.approx(60, rel=1e-5)
    assert stopping.best < 0.8 * evaluations[0]["dev_ppl"]
    assert not softmax.bias.any() and softmax.bias.requires_grad
    assert stopping.best == min(r["dev_ppl"] for r in evaluations) and stopping.best_step < evaluations[-1]["step"]
    torch.testing.assert_close(held_out(softmax, heldout, 64, "held out").ppl_average, stopping.best, rtol=1e-6, atol=0)
    unseen = softmax.weight[40:]
    assert bool((unseen == unseen[0]).all()) and not bool((softmax.weight[:40] == softmax.weight[0]).all())
    assert runs[0] == runs[1]


def test_the_outputs_score_as_the_trainer_evaluates(tmp_path):
    """The held-out perplexity from the outputs computed once is the trainer's evaluation's
    (``held_out_nll``, the biLM run at every evaluation), to float32 rounding."""
    overrides = {"paths.train": str(WIKITEXT / "train.txt"), **TINY_BILM, "training.batch_tokens": 400, "training.max_steps": 2}
    run = pretrain(load_config(None, overrides), tmp_path / "lm", show_progress=False)
    model, vocab = load_language_model(run)
    corpus = CorpusSettings(tokenized=True, lang="en", on_decode_error="raise")
    reader = SequenceReader([WIKITEXT / "valid.txt"], corpus)
    want = EvalResult.from_sums(held_out_nll(model, vocab, reader, 400), "valid")
    got = held_out(model.softmax, top_layer_outputs(model, vocab, reader, 400), 300, "valid")
    assert got.tokens == want.tokens
    torch.testing.assert_close(got.ppl_average, want.ppl_average, rtol=1e-5, atol=0)


def test_a_run_from_a_fitted_softmax_trains_the_same_with_its_unseen_rows_tied(tmp_path):
    """[objective] tie_unseen_rows: the rows of the words the training text never shows, equal
    in a softmax fitted from zero, scored as one: the same held-out perplexities as
    the full softmax's, to float32 rounding over a few updates; refused where they differ."""
    overrides = {"paths.train": str(WIKITEXT / "train.txt"), **TINY_BILM, "training.batch_tokens": 400, "training.max_steps": 2}
    lm = pretrain(load_config(None, overrides), tmp_path / "lm", show_progress=False)
    model, vocab = load_language_model(lm)
    corpus = CorpusSettings(tokenized=True, lang="en", on_decode_error="raise")
    fitted = tmp_path / "fitted"
    shutil.copytree(lm, fitted)
    train = top_layer_outputs(model, vocab, SequenceReader([WIKITEXT / "valid.txt"], corpus), 400)
    settings = FitSettings(learning_rate=0.05, batch=256, max_steps=5, eval_every=5, patience=1, seed=0)
    fit_softmax(model.softmax, train, train, settings, fitted, show_progress=False)
    runs = {}
    for tied in (False, True):
        whole = {**overrides, "paths.train": str(WIKITEXT / "valid.txt"), "paths.dev": str(WIKITEXT / "valid.txt"),
                 "paths.vocab": str(lm / "vocab.txt"), "paths.init_bilm": str(fitted), "objective.softmax": "full",
                 "objective.tie_unseen_rows": tied, "training.max_steps": 4, "training.eval_every": 2}  # fmt: skip
        run = pretrain(load_config(None, whole), tmp_path / f"tied-{tied}", show_progress=False)
        runs[tied] = [r["dev_ppl"] for r in read_metrics(run) if "dev_ppl" in r]
    assert len(runs[True]) == 2
    torch.testing.assert_close(runs[True], runs[False], rtol=1e-6, atol=0)
    with pytest.raises(ConfigError, match="tie_unseen_rows: tie_rows: the .* rows are not equal"):
        pretrain(load_config(None, {**whole, "paths.init_bilm": str(lm)}), tmp_path / "unfitted", show_progress=False)
