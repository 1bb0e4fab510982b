"""Forgetting, converged: a softmax fitted to a frozen biLM's top layer on general text, its
perplexity on held-out general text. The fit is adapt's own (``softmax_fit``: the unigram start,
AdamW, 3 passes, the best of evaluations every 50 updates), so every biLM gets a softmax fitted
to the end, and the perplexity measures what its top layer still tells about the text.

Run: OMP_NUM_THREADS=2 PYTHONPATH=. python docs/results/adapt/speed/forgetting.py BILM_DIR VOCAB TRAIN VALID
(VOCAB: the bundled model's vocab.txt; TRAIN, VALID: the first 1,200,000 and 300,000 bytes of
WikiText-2's train.txt and valid.txt, 228,543 and 58,040 tokens).
"""

import sys
import tempfile
from pathlib import Path

import torch

from spacy_elmo import load_bilm
from spacy_elmo.nn.softmax import LMSoftmax
from spacy_elmo.pretrain.corpus import CorpusSettings, SequenceReader
from spacy_elmo.pretrain.model import BiLMLanguageModel
from spacy_elmo.pretrain.softmax_fit import FitSettings, fit_softmax, top_layer_outputs
from spacy_elmo.pretrain.vocab import Vocab

if __name__ == "__main__":
    bilm_dir, vocab_file, train, valid = sys.argv[1:5]
    torch.manual_seed(0)
    vocab = Vocab.load(Path(vocab_file))
    bilm = load_bilm(bilm_dir)
    model = BiLMLanguageModel(bilm, LMSoftmax(len(vocab), bilm.options.lstm.projection_dim))
    corpus = CorpusSettings(tokenized=True, lang="en")
    outputs = [top_layer_outputs(model, vocab, SequenceReader([Path(path)], corpus), 1280) for path in (train, valid)]
    fit = FitSettings(
        learning_rate=0.01, batch=4096, max_steps=3 * len(outputs[0]) // 4096, eval_every=50, patience=3, seed=0,
        weight_decay=0.5,
    )  # fmt: skip
    stopping = fit_softmax(model.softmax, *outputs, fit, Path(tempfile.mkdtemp()), show_progress=False)
    norm = outputs[1].hidden.norm(dim=1).mean()
    print(f"{bilm_dir}: WikiText-2 valid perplexity {stopping.best:.2f} (top-layer norm {norm:.2f})")
