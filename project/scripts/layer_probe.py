"""What each biLM layer tells a linear classifier about a tagging task: per biLM and layer, a
logistic regression from the frozen vectors to each token's label (NER: its BIO tag, e.g.
B-person; tagger: its tag), trained on one .spacy file and scored on another. A convex fit with
no seed, so unlike a trained component its score does not jump when the biLM changes by nothing.

python scripts/layer_probe.py TRAIN.spacy TEST.spacy OUTPUT.json BILM [BILM ...] [--label NAME ...]
    [--labels ner|tag] [--l2 1e-4] [--iterations 200]

BILM: a model directory (options.json + model.safetensors; "bundled": the bundled biLM). Layers:
"token" (layer 0), "lstm1", "lstm2" (both directions, as listeners get them) and "mean" (the three
averaged, a listener's mix at its start). Score: micro-F1 over the tokens whose gold or predicted
label is not "O" (NER), or accuracy (tag).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import spacy
import srsly
import torch
from spacy.tokens import DocBin

from spacy_elmo.formats import read_bilm
from spacy_elmo.sources import resolve_weight_source

BATCH_SENTENCES = 64
OUTSIDE = "O"


def read_labelled(path: Path, kind: str) -> Tuple[List[List[str]], List[str]]:
    """Token sequences and one label per token (all sentences in order)."""
    docs = [doc for doc in DocBin().from_disk(path).get_docs(spacy.blank("en").vocab) if len(doc)]
    if kind == "ner":
        labels = [t.ent_iob_ + "-" + t.ent_type_ if t.ent_type_ else OUTSIDE for doc in docs for t in doc]
    else:
        labels = [t.tag_ for doc in docs for t in doc]
    return [[t.text for t in doc] for doc in docs], labels


def features(bilm_path: str, sentences: List[List[str]]) -> Dict[str, torch.Tensor]:
    """Per layer, (n_tokens, 2 * projection_dim) vectors of every token (layer 0 is [x; x])."""
    bilm = read_bilm(resolve_weight_source(None if bilm_path == "bundled" else bilm_path, what="biLM"))
    parts: List[torch.Tensor] = []
    with torch.no_grad():
        for start in range(0, len(sentences), BATCH_SENTENCES):
            layers, mask = bilm(torch.from_numpy(bilm.batch_to_ids(sentences[start : start + BATCH_SENTENCES])))
            parts.append(layers[:, mask])
    stacked = torch.cat(parts, dim=1)
    found = {"token": stacked[0], **{f"lstm{k}": stacked[k] for k in range(1, stacked.shape[0])}}
    found["mean"] = stacked.mean(dim=0)
    return found


def fit_probe(x: torch.Tensor, y: torch.Tensor, n_classes: int, l2: float, iterations: int) -> torch.nn.Linear:
    """Multinomial logistic regression (L-BFGS, full batch, L2 on the weights), standardised inputs."""
    probe = torch.nn.Linear(x.shape[1], n_classes).double()
    torch.nn.init.zeros_(probe.weight)
    torch.nn.init.zeros_(probe.bias)
    optimizer = torch.optim.LBFGS(probe.parameters(), max_iter=iterations, line_search_fn="strong_wolfe")

    def loss() -> torch.Tensor:
        optimizer.zero_grad()
        value = torch.nn.functional.cross_entropy(probe(x), y) + l2 * probe.weight.pow(2).sum()
        value.backward()
        return value

    optimizer.step(loss)
    return probe


def score(predicted: np.ndarray, gold: np.ndarray, outside: int, kind: str) -> float:
    if kind != "ner":
        return float((predicted == gold).mean())
    hits = ((predicted == gold) & (gold != outside)).sum()
    precision = hits / max(1, (predicted != outside).sum())
    recall = hits / max(1, (gold != outside).sum())
    return float(2 * precision * recall / max(precision + recall, 1e-12))


def probe_bilm(bilm: str, train: Tuple, test: Tuple, classes: List[str], args: argparse.Namespace) -> Dict[str, float]:
    index = {label: k for k, label in enumerate(classes)}
    y_train = torch.tensor([index[label] for label in train[1]])
    y_test = np.array([index.get(label, -1) for label in test[1]])
    train_x, test_x = features(bilm, train[0]), features(bilm, test[0])
    scores = {}
    for layer in train_x:
        mean, std = train_x[layer].mean(0), train_x[layer].std(0) + 1e-6
        x = ((train_x[layer] - mean) / std).double()
        probe = fit_probe(x, y_train, len(classes), args.l2, args.iterations)
        with torch.no_grad():
            predicted = probe(((test_x[layer] - mean) / std).double()).argmax(1).numpy()
        scores[layer] = 100 * score(predicted, y_test, index.get(OUTSIDE, -2), args.labels)
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train", type=Path)
    parser.add_argument("test", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("bilms", nargs="+")
    parser.add_argument("--label", action="append", help="a name per BILM, in order (default: its path)")
    parser.add_argument("--labels", choices=["ner", "tag"], default="ner")
    parser.add_argument("--l2", type=float, default=1e-4)
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    names = args.label or args.bilms
    if len(names) != len(args.bilms):
        parser.error(f"{len(names)} --label for {len(args.bilms)} biLMs")
    torch.set_num_threads(1)
    train, test = read_labelled(args.train, args.labels), read_labelled(args.test, args.labels)
    classes = sorted(set(train[1]))
    rows = []
    for name, bilm in zip(names, args.bilms):
        rows.append({"label": name, "bilm": bilm, "scores": probe_bilm(bilm, train, test, classes, args)})
        print(
            f"{name}: " + ", ".join(f"{layer} {value:.2f}" for layer, value in rows[-1]["scores"].items()), flush=True
        )
        settings = {"labels": args.labels, "l2": args.l2, "iterations": args.iterations}
        srsly.write_json(args.output, {"train": str(args.train), "test": str(args.test), **settings, "bilms": rows})
    print(f"Wrote {args.output}")


if __name__ == "__main__":
    main()
