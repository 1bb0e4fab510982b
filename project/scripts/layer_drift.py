"""How far each biLM layer's vectors moved: per token of a text, the cosine between the source
biLM's and another biLM's vectors of that token, per layer and direction; and how far each group
of weights moved (relative L2 distance to the source's).

python scripts/layer_drift.py SOURCE TEXT OUTPUT.json BILM [BILM ...] [--label NAME ...]

SOURCE, BILM: model directories (options.json + model.safetensors; "bundled": the bundled biLM).
TEXT: a .spacy file (its docs' tokens) or a tokenized text file (one sentence a line). Layers:
"token" (the character CNN's output, layer 0), "lstm1 forward", "lstm1 backward", "lstm2 ...";
the LSTM layers are the vectors the elmo pipe hands to listeners (layer 2 with its residual).
"random_pairs": the source's mean cosine between two random tokens' vectors, per layer (the scale).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, Iterator, List, Sequence

import numpy as np
import srsly
import torch

from spacy_elmo.formats import read_bilm
from spacy_elmo.nn.bilm import BiLM
from spacy_elmo.sources import resolve_weight_source

#: Sentences per biLM call (padded batches; the biLM is stateless, so this changes no vector).
BATCH_SENTENCES = 64
#: Weight groups for the parameter distances: a name prefix of the state dict each.
WEIGHT_GROUPS = {
    "character CNN + highway + projection": "token_encoder.",
    "lstm1 forward": "forward_lstm.layers.0.",
    "lstm2 forward": "forward_lstm.layers.1.",
    "lstm1 backward": "backward_lstm.layers.0.",
    "lstm2 backward": "backward_lstm.layers.1.",
}


def load(path: str) -> BiLM:
    return read_bilm(resolve_weight_source(None if path == "bundled" else path, what="biLM"))


def read_sentences(path: Path) -> List[List[str]]:
    """The token sequences of a .spacy file's docs, or of a tokenized text file's lines."""
    if path.suffix == ".spacy":
        import spacy
        from spacy.tokens import DocBin

        docs = DocBin().from_disk(path).get_docs(spacy.blank("en").vocab)
        return [[t.text for t in doc] for doc in docs if len(doc)]
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.split() for line in lines if line.split()]


def layer_vectors(bilm: BiLM, sentences: Sequence[List[str]]) -> Iterator[Dict[str, np.ndarray]]:
    """Per batch of sentences, each layer's (n_tokens, dim) vectors, tokens of all sentences in order."""
    half = bilm.options.lstm.projection_dim
    with torch.no_grad():
        for start in range(0, len(sentences), BATCH_SENTENCES):
            batch = sentences[start : start + BATCH_SENTENCES]
            layers, mask = bilm(torch.from_numpy(bilm.batch_to_ids(batch)))
            tokens = layers[:, mask].numpy()  # (n_layers + 1, n_tokens, 2 * half)
            vectors = {"token": tokens[0, :, :half]}
            for k in range(1, tokens.shape[0]):
                vectors[f"lstm{k} forward"] = tokens[k, :, :half]
                vectors[f"lstm{k} backward"] = tokens[k, :, half:]
            yield vectors


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return (a * b).sum(axis=1) / np.maximum(norms, 1e-12)


def summary(values: np.ndarray) -> Dict[str, float]:
    q10, q50, q90 = np.percentile(values, [10, 50, 90])
    return {
        "mean": float(values.mean()),
        "sd": float(values.std()),
        "p10": float(q10),
        "median": float(q50),
        "p90": float(q90),
    }


def drift(
    source: List[Dict[str, np.ndarray]], other: BiLM, sentences: Sequence[List[str]]
) -> Dict[str, Dict[str, float]]:
    """Per layer: the cosines' summary, and the mean vector norm of both biLMs (``source``: the
    source biLM's ``layer_vectors`` of the same sentences)."""
    found: Dict[str, List[np.ndarray]] = {}
    norms: Dict[str, List[np.ndarray]] = {}
    for before, after in zip(source, layer_vectors(other, sentences)):
        for name in before:
            found.setdefault(name, []).append(cosines(before[name], after[name]))
            norms.setdefault(name, []).append(
                np.stack([np.linalg.norm(before[name], axis=1), np.linalg.norm(after[name], axis=1)])
            )
    result = {}
    for name, parts in found.items():
        pair = np.concatenate(norms[name], axis=1)
        result[name] = {
            **summary(np.concatenate(parts)),
            "norm_source": float(pair[0].mean()),
            "norm": float(pair[1].mean()),
        }
    return result


def random_pair_cosines(source: List[Dict[str, np.ndarray]], pairs: int = 20_000) -> Dict[str, float]:
    """Per layer, the mean cosine between the source's vectors of two random tokens of the text:
    what "unrelated" reads as in that layer (the scale for the cosines to the source)."""
    rng = np.random.default_rng(0)
    result = {}
    for name in source[0]:
        vectors = np.concatenate([batch[name] for batch in source])
        a, b = rng.integers(0, len(vectors), size=(2, pairs))
        result[name] = float(cosines(vectors[a], vectors[b]).mean())
    return result


def weight_distances(source: BiLM, other: BiLM) -> Dict[str, float]:
    """Per weight group: ||w - w_source|| / ||w_source|| over the group's parameters."""
    before, after = source.state_dict(), other.state_dict()
    distances = {}
    for group, prefix in WEIGHT_GROUPS.items():
        names = [name for name in before if name.startswith(prefix) and before[name].is_floating_point()]
        moved = sum(float(((after[n] - before[n]) ** 2).sum()) for n in names)
        size = sum(float((before[n] ** 2).sum()) for n in names)
        distances[group] = (moved / size) ** 0.5
    return distances


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("text", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("bilms", nargs="+")
    parser.add_argument("--label", action="append", help="a name per BILM, in order (default: its path)")
    args = parser.parse_args()
    labels = args.label or args.bilms
    if len(labels) != len(args.bilms):
        parser.error(f"{len(labels)} --label for {len(args.bilms)} biLMs")
    torch.set_num_threads(1)
    sentences = read_sentences(args.text)
    source = load(args.source)
    source_vectors = list(layer_vectors(source, sentences))
    rows = []
    for label, path in zip(labels, args.bilms):
        other = load(path)
        rows.append(
            {
                "label": label,
                "bilm": path,
                "layers": drift(source_vectors, other, sentences),
                "weights": weight_distances(source, other),
            }
        )
        cells = ", ".join(f"{name} {v['mean']:.3f}" for name, v in rows[-1]["layers"].items())
        print(f"{label}: mean cosine {cells}", flush=True)
    tokens = sum(map(len, sentences))
    output = {
        "source": args.source,
        "text": str(args.text),
        "tokens": tokens,
        "random_pairs": random_pair_cosines(source_vectors),
        "bilms": rows,
    }
    srsly.write_json(args.output, output)
    print(f"Wrote {args.output} ({tokens:,} tokens)")


if __name__ == "__main__":
    main()
