"""``python -m benchmarks senses``: does a biLM output separate the senses of ambiguous words?

The data is the package's (:mod:`spacy_elmo.cli.senses`: ``data/senses.jsonl``, ambiguous English
words, each with two senses and several sentences per sense); ``--heldout`` scores
``senses_heldout.jsonl``, 24 other words written after the pipe's default mix and the bundled
model were chosen on the first set, to check that those choices carry over.

Every sentence is run through the biLM alone (the package's public path: ``bilm.batch_to_ids`` and
``BiLM.forward``, stateless, so a sentence's vectors do not depend on its batch), and the target
token's vector is taken from each candidate output:

- each layer alone (layer 0 is the context-free token layer ``[x; x]``);
- ``equal mix``: weight 1/(L+1) on every layer (the paper's plain average; the ``elmo`` pipe's
  default before the benchmark showed it separates senses least, ``mix_weights = [1, 1, 1]``);
- ``contextual mix``: equal weights on the LSTM layers only, what the ``elmo`` pipe puts in
  ``doc._.elmo`` and ``token.vector`` with its default config (``mix_weights = null``, gamma 1);
- each LSTM layer's forward and backward halves alone (which direction carries the senses);
- the mixes with AllenNLP's ``do_layer_norm`` (each layer of a sentence normalised by the mean and
  standard deviation of all its elements before mixing, so that no layer dominates by scale);
- every output again ``centered``: a per-dimension mean subtracted, which removes the direction
  all vectors share (the mean over every token of the benchmark's sentences, no labels used, or
  over other text given with ``--center-text``).

Two figures per output, and the margin again over two groups of words when the data gives ``pos``:
words whose occurrences all share one part of speech (bank, bass, crane: only meaning tells the
senses apart) and words whose senses differ in part of speech too (a play / to play, which syntax
alone separates):

- ``margin``: mean within-sense cosine minus mean across-sense cosine; within = pairs of different
  sentences with the same sense of a word, across = pairs with different senses of a word;
  averaged per word, then over words. A context-free output gives exactly 0.
- ``accuracy``: leave-one-out nearest sense: for each occurrence, is the most similar other
  occurrence of the same word of the same sense? Ties share the credit (c of k tied neighbours
  of the right sense scores c/k), so a context-free output scores the chance level.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from spacy.util import minibatch

from spacy_elmo.cli.demo import demo_words
from spacy_elmo.cli.plots import pyplot, save_figure
from spacy_elmo.cli.senses import DATA_FILE, TIE_TOLERANCE, SenseSentence, has_one_tag, read_senses, unit_rows
from spacy_elmo.nn import BiLM
from spacy_elmo.nn.scalar_mix import default_mix_weights, normalize_layers

#: The output the ``elmo`` pipe writes to ``doc._.elmo`` with its default config.
PIPE_DEFAULT = "contextual mix"

SENSE_COLUMNS = [
    ("output", "output", ""),
    ("margin", "margin", ".3f"),
    ("within", "within cos", ".3f"),
    ("across", "across cos", ".3f"),
    ("accuracy", "nearest-sense acc", ".3f"),
]
#: The figures of one word, and of their means over words.
SCORE_KEYS = ("margin", "within", "across", "accuracy")

#: The margin over each group of words, when the data tags the targets' parts of speech.
POS_COLUMNS = [
    ("margin_same_pos", "margin, same POS", ".3f"),
    ("margin_pos_differs", "margin, POS differs", ".3f"),
]


@torch.no_grad()
def sentence_layers(
    bilm: BiLM, sentences: Sequence[Sequence[str]], batch_size: int = 32
) -> List[np.ndarray]:
    """Every biLM layer of each tokenized sentence: ``(n_layers + 1, len(sentence), width)``
    float32 arrays, one per sentence."""
    device = next(bilm.parameters()).device
    out: List[np.ndarray] = []
    for batch in minibatch(sentences, batch_size):
        layers, _ = bilm(torch.from_numpy(bilm.batch_to_ids(batch)).to(device))
        layers = layers.cpu().numpy()
        out.extend(layers[:, i, : len(tokens)] for i, tokens in enumerate(batch))
    return out


def layer_norm(layers: np.ndarray) -> np.ndarray:
    """AllenNLP's ``ScalarMix(do_layer_norm=True)`` normalisation of one sentence's
    ``(n_layers, n_tokens, width)`` layers, as a listener with ``layer_norm = true`` applies it
    (:func:`spacy_elmo.nn.scalar_mix.normalize_layers` on one sentence: statistics per sentence)."""
    return normalize_layers(torch.from_numpy(layers)).numpy()


def candidate_weights(n_layers: int) -> Dict[str, np.ndarray]:
    """Named outputs as mix weights over the ``n_layers`` biLM layers (token layer first)."""
    candidates = {}
    for k in range(n_layers):
        name = "layer 0 (token)" if k == 0 else f"layer {k}"
        if 0 < k == n_layers - 1:
            name += " (top)"
        candidates[name] = np.eye(n_layers, dtype=np.float32)[k]
    candidates["equal mix"] = np.full(n_layers, 1.0 / n_layers, dtype=np.float32)
    candidates[PIPE_DEFAULT] = default_mix_weights(n_layers)
    return candidates


def _mixes(layers: Sequence[np.ndarray]) -> Dict[str, List[np.ndarray]]:
    """Each uncentered candidate for every sentence: name -> per-sentence ``(n_tokens, width)``."""
    n_layers = layers[0].shape[0]
    normed = [layer_norm(x) for x in layers]
    outputs: Dict[str, List[np.ndarray]] = {}
    for name, weights in candidate_weights(n_layers).items():
        outputs[name] = [np.tensordot(weights, x, axes=(0, 0)) for x in layers]
        if "mix" in name:
            outputs[f"{name}, layer norm"] = [np.tensordot(weights, x, axes=(0, 0)) for x in normed]
    half = layers[0].shape[-1] // 2
    for k in range(1, n_layers):
        outputs[f"layer {k} forward"] = [x[k, :, :half] for x in layers]
        outputs[f"layer {k} backward"] = [x[k, :, half:] for x in layers]
    return outputs


def candidate_outputs(
    layers: Sequence[np.ndarray], reference: Optional[Sequence[np.ndarray]] = None
) -> Dict[str, List[np.ndarray]]:
    """Each candidate output for every sentence: name -> per-sentence ``(n_tokens, width)``.

    The ``centered`` ones subtract the per-dimension mean of the same output over every token of
    ``reference`` (the layers of other sentences, e.g. the training text), by default of
    ``layers`` themselves: no labels are used, but a pipe would have to store such a mean.
    """
    outputs = _mixes(layers)
    means = {
        name: np.concatenate(values).mean(axis=0)
        for name, values in (_mixes(reference) if reference is not None else outputs).items()
    }
    for name in list(outputs):
        outputs[f"{name}, centered"] = [x - means[name] for x in outputs[name]]
    return outputs


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    """(n, width) -> (n, n) cosines, in float64."""
    if not np.all(np.asarray(vectors).any(axis=1)):
        raise ValueError("cosine of a zero vector: a target token got no vector")
    unit = unit_rows(vectors)
    return unit @ unit.T


def word_scores(vectors: np.ndarray, senses: Sequence[str]) -> Dict[str, float]:
    """Within, across, margin and nearest-sense accuracy of one word's occurrences:
    ``vectors`` (n, width), ``senses`` the n sense labels."""
    cos = cosine_matrix(vectors)
    labels = np.asarray(senses)
    same = labels[:, None] == labels[None, :]
    off_diagonal = ~np.eye(len(labels), dtype=bool)
    within = float(cos[same & off_diagonal].mean())
    across = float(cos[~same].mean())
    hits = []
    for i in range(len(labels)):
        others = off_diagonal[i]
        best = cos[i, others].max()
        tied = others & (cos[i] >= best - TIE_TOLERANCE)
        hits.append(same[i, tied].mean())
    return {
        "within": within,
        "across": across,
        "margin": within - across,
        "accuracy": float(np.mean(hits)),
    }


def sense_scores(
    vectors: np.ndarray,
    words: Sequence[str],
    senses: Sequence[str],
    pos: Optional[Sequence[str]] = None,
) -> Dict[str, Any]:
    """:func:`word_scores` per word, and their means over words (each word counts once); with
    ``pos`` (each occurrence's tag), also the mean margin over the words whose occurrences share
    one tag (``margin_same_pos``) and over the others (``margin_pos_differs``), None for a group
    with no words."""
    words_ = np.asarray(words)
    per_word = {}
    for word in dict.fromkeys(words):
        rows = np.flatnonzero(words_ == word)
        per_word[word] = word_scores(vectors[rows], [senses[i] for i in rows])
    means: Dict[str, Any] = {
        key: float(np.mean([scores[key] for scores in per_word.values()]))
        for key in SCORE_KEYS
    }
    if pos is not None:
        one_tag = has_one_tag(words, pos)
        for key, same in (("margin_same_pos", True), ("margin_pos_differs", False)):
            margins = [per_word[w]["margin"] for w in per_word if one_tag[w] == same]
            means[key] = float(np.mean(margins)) if margins else None
    return {**means, "per_word": per_word}


def per_word_rows(row: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One benchmark row's per-word scores as rows, least separated word first: which words a
    model fails on (the row's margin and accuracy are these rows' means)."""
    per_word = row["per_word"]
    return [
        {"output": word, **{key: scores[key] for key in SCORE_KEYS}}
        for word, scores in sorted(per_word.items(), key=lambda item: item[1]["margin"])
    ]


def run_senses_bench(
    bilm: BiLM,
    data: Path = DATA_FILE,
    batch_size: int = 32,
    center_sentences: Optional[Sequence[Sequence[str]]] = None,
) -> Dict[str, Any]:
    """Score every candidate output of ``bilm`` on the sentences of ``data``; the centered
    outputs subtract the mean over ``center_sentences`` (tokenized), by default over the
    benchmark's own sentences."""
    sentences = read_senses(data)
    layers = sentence_layers(bilm, [s.tokens for s in sentences], batch_size)
    reference = None
    if center_sentences is not None:
        reference = sentence_layers(bilm, center_sentences, batch_size)
    words = [s.word for s in sentences]
    senses = [s.sense for s in sentences]
    pos = [s.pos for s in sentences] if sentences[0].pos is not None else None
    one_tag = list(has_one_tag(words, pos).values()) if pos else []
    rows = []
    for name, outputs in candidate_outputs(layers, reference).items():
        targets = np.stack([x[s.target] for x, s in zip(outputs, sentences)])
        rows.append({"output": name, **sense_scores(targets, words, senses, pos)})
    return {
        "data": {
            "file": str(data),
            "words": len(set(words)),
            "senses": len({(s.word, s.sense) for s in sentences}),
            "sentences": len(sentences),
            "words_same_pos": sum(one_tag) if pos else None,
            "words_pos_differs": len(one_tag) - sum(one_tag) if pos else None,
            "centering_tokens": sum(
                len(x) for x in (center_sentences or [s.tokens for s in sentences])
            ),
        },
        "rows": rows,
    }


#: How many words of each part-of-speech group ``--plot`` draws (the first ones in the data).
PLOT_WORDS_PER_GROUP = 2

#: Below this total variance (of unit vectors) a word's occurrences count as one point: the
#: context-free token layer, equal up to float32 noise, which a projection would blow up.
POINT_VARIANCE = 1e-8


def plot_words(sentences: Sequence[SenseSentence], per_group: int = PLOT_WORDS_PER_GROUP) -> List[str]:
    """The words ``--plot`` draws, a rule rather than a choice by how they look: the first
    ``per_group`` words (data order) whose senses differ in part of speech, then the first
    ``per_group`` whose occurrences share one, so the picture shows what separates and what does
    not; without ``pos`` in the data, the first ``2 * per_group`` words."""
    words = list(dict.fromkeys(s.word for s in sentences))
    if sentences[0].pos is None:
        return words[: 2 * per_group]
    differs = demo_words(sentences)
    return differs[:per_group] + [w for w in words if w not in differs][:per_group]


def project_2d(vectors: np.ndarray) -> Tuple[np.ndarray, List[float], float]:
    """The first two principal components of ``vectors`` (n, width) scaled to unit length (the
    benchmark compares cosines, so the picture shows directions): ``(coords (n, 2), explained
    variance fractions of the two axes, total variance)``. Occurrences that are one point (total
    variance below :data:`POINT_VARIANCE`) project to the origin with fractions 0."""
    unit = unit_rows(vectors)
    centered = unit - unit.mean(axis=0)
    total = float((centered**2).sum() / len(unit))
    if total < POINT_VARIANCE:
        return np.zeros((len(unit), 2)), [0.0, 0.0], total
    u, s, _ = np.linalg.svd(centered, full_matrices=False)
    k = min(2, len(s))
    coords = np.zeros((len(unit), 2))
    coords[:, :k] = u[:, :k] * s[:k]
    variance = s**2
    explained = [float(variance[j] / variance.sum()) if j < k else 0.0 for j in range(2)]
    return coords, explained, total


def sense_projection(
    bilm: BiLM, data: Path = DATA_FILE, words: Optional[Sequence[str]] = None, batch_size: int = 32
) -> Dict[str, Any]:
    """The data of the ``--plot`` figure: for each of ``words`` (default :func:`plot_words`) and
    each biLM layer plus the pipe's default mix, a 2-D PCA (:func:`project_2d`) of that word's
    occurrences, one panel each, fitted per panel. JSON-ready: ``{"words", "outputs", "panels":
    [{"word", "output", "senses", "texts", "x", "y", "explained", "variance"}], "pos_differs":
    {word: bool} or None}``, the senses as the data file names them."""
    sentences = read_senses(data)
    words = list(words) if words is not None else plot_words(sentences)
    missing = [w for w in words if w not in {s.word for s in sentences}]
    if missing:
        raise ValueError(f"{data}: no sentences of {missing}")
    chosen = [s for s in sentences if s.word in words]
    layers = sentence_layers(bilm, [s.tokens for s in chosen], batch_size)
    weights = candidate_weights(layers[0].shape[0])
    outputs = [name for name in weights if name.startswith("layer ")] + [PIPE_DEFAULT]
    panels = []
    for word in words:
        mine = [(x, s) for x, s in zip(layers, chosen) if s.word == word]
        for name in outputs:
            targets = np.stack([np.tensordot(weights[name], x[:, s.target], axes=(0, 0)) for x, s in mine])
            coords, explained, variance = project_2d(targets)
            panels.append(
                {
                    "word": word,
                    "output": name,
                    "senses": [s.sense for _, s in mine],
                    "texts": [s.text for _, s in mine],
                    "x": coords[:, 0].tolist(),
                    "y": coords[:, 1].tolist(),
                    "explained": explained,
                    "variance": variance,
                }
            )
    pos_differs = None
    if chosen[0].pos is not None:
        one_tag = has_one_tag([s.word for s in chosen], [s.pos for s in chosen])
        pos_differs = {word: not one_tag[word] for word in words}
    return {
        "file": str(data),
        "words": words,
        "outputs": outputs,
        "panels": panels,
        "pos_differs": pos_differs,
    }


def draw_projection(projection: Dict[str, Any], path: Path, title: str = "") -> Path:
    """Draw :func:`sense_projection`'s panels to a PNG: a row per word, a column per output,
    points coloured by sense; all panels share one scale (cosine geometry), so the token layer's
    single point and the contextual layers' spread compare at a glance. Raises ImportError with
    the install command when matplotlib is missing."""
    plt = pyplot("benchmarks senses --plot")

    words, outputs = projection["words"], projection["outputs"]
    fig, axes = plt.subplots(
        len(words), len(outputs), figsize=(2.6 * len(outputs), 2.4 * len(words)),
        sharex=True, sharey=True, squeeze=False,
    )
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    for panel in projection["panels"]:
        ax = axes[words.index(panel["word"])][outputs.index(panel["output"])]
        senses = list(dict.fromkeys(panel["senses"]))
        for k, sense in enumerate(senses):
            rows = [i for i, s in enumerate(panel["senses"]) if s == sense]
            ax.scatter(
                [panel["x"][i] for i in rows], [panel["y"][i] for i in rows],
                s=28, color=colours[k % len(colours)], label=sense, alpha=0.8,
            )
        explained = panel["explained"]
        note = "one point" if not any(explained) else f"PC1+2: {sum(explained):.0%} of variance"
        ax.text(0.03, 0.03, note, transform=ax.transAxes, fontsize=7, color="grey")
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        if words.index(panel["word"]) == 0:
            name = panel["output"]
            ax.set_title(f"{name} (pipe default)" if name == PIPE_DEFAULT else name, fontsize=9)
        if outputs.index(panel["output"]) == 0:
            label = panel["word"]
            if projection.get("pos_differs") is not None:
                differs = projection["pos_differs"][panel["word"]]
                label += "\n(POS differs)" if differs else "\n(same POS)"
            ax.set_ylabel(label, fontsize=10)
            ax.legend(fontsize=7, loc="upper left")  # the token layer is one point, at the origin
    fig.supxlabel(
        "each panel: the word's occurrences (unit vectors) on their first two principal components",
        fontsize=8,
    )
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)
