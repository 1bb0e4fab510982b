"""What ``python -m spacy_elmo demo`` shows: which senses the vectors tell apart, measured.

Each sentence of the sense data (``cli/senses.py``) in turn is the query; its target's vector is
compared with the word's other sentences grouped by sense, and the right sense wins when its mean
cosine beats every other group's by more than float noise; the context-free token layer is the
baseline. Computed at run time; nothing here is a stored result. docs/guide/senses.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

import numpy as np
import typer

from ..bench.report import table
from .errors import fail, failing
from .senses import TIE_TOLERANCE, SenseSentence, has_one_tag, unit_rows
from .weights import OPTIONS_FILE, PRECISION, THREADS_HELP, WEIGHT_FILE, WEIGHTS, elmo_pipeline, weight_settings

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Token

#: The released model the demo points to for senses that share a part of speech (the original
#: ELMo, trained on the 1 Billion Word Benchmark; ``spacy_elmo/hub/catalog.json``).
RELEASED_FOR_MEANING = "original"

#: How the two outputs are named in the table and the summary.
TOKEN_LAYER = "token layer"
IN_CONTEXT = "in context"


@dataclass(frozen=True)
class QueryScores:
    """One query occurrence of ``word``: ``sense`` its own sense (None for a typed sentence),
    ``means[output][sense]`` its mean cosine to that sense's other occurrences."""

    word: str
    sense: Optional[str]
    text: str
    means: Dict[str, Dict[str, float]]

    def outcome(self, output: str) -> str:
        """``yes`` (own sense strictly best), ``tie`` (best within float noise of another
        sense) or ``no``; for a query without a sense, the best sense's name."""
        ranked = sorted(self.means[output].items(), key=lambda item: -item[1])
        if len(ranked) > 1 and ranked[0][1] - ranked[1][1] <= TIE_TOLERANCE:
            return "tie"
        if self.sense is None:
            return ranked[0][0]
        return "yes" if ranked[0][0] == self.sense else "no"


def group_means(
    query: np.ndarray, vectors: np.ndarray, senses: Sequence[str], skip: Optional[int] = None
) -> Dict[str, float]:
    """Mean cosine of ``query`` to each sense's rows of ``vectors``, leaving out row ``skip``."""
    cos = unit_rows(vectors) @ unit_rows(query[None])[0]
    labels = np.asarray(senses)
    keep = np.ones(len(labels), dtype=bool)
    if skip is not None:
        keep[skip] = False
    return {
        sense: float(cos[keep & (labels == sense)].mean()) for sense in dict.fromkeys(senses)
    }


@dataclass(frozen=True)
class SenseVectors:
    """The sense sentences through the pipe: marked texts and per-output target vectors."""

    sentences: Sequence[SenseSentence]
    texts: List[str]
    outputs: Dict[str, np.ndarray]


def output_vectors(targets: Sequence["Token"]) -> Dict[str, np.ndarray]:
    """The two outputs compared at each target token: ``token._.elmo`` and layer 0 of
    ``doc._.elmo_layers`` (context-free), each (n_targets, width)."""
    return {
        TOKEN_LAYER: np.stack([t.doc._.elmo_layers[0, t.i] for t in targets]),
        IN_CONTEXT: np.stack([t._.elmo for t in targets]),
    }


def embed_sentences(nlp: "Language", sentences: Sequence[SenseSentence]) -> SenseVectors:
    """Run ``nlp`` (with the ``elmo`` pipe) on the sense sentences. Raises ValueError when its
    tokenizer splits a sentence differently from the one the data was read with."""
    docs = list(nlp.pipe([s.text for s in sentences]))
    for doc, sentence in zip(docs, sentences):
        if len(doc) <= sentence.target or doc[sentence.target].text != sentence.word:
            raise ValueError(
                f"the pipeline tokenizes {sentence.text!r} differently from the sense data: "
                f"expected {sentence.word!r} as token {sentence.target}"
            )
    targets = [doc[s.target] for doc, s in zip(docs, sentences)]
    texts = [mark(doc, s.target) for doc, s in zip(docs, sentences)]
    return SenseVectors(sentences, texts, output_vectors(targets))


def query_scores(
    data: SenseVectors, word: str, sense: Optional[str], text: str, query: Dict[str, np.ndarray], leave_out: Optional[int] = None
) -> QueryScores:
    """``query``'s vector per output against ``word``'s sentences grouped by sense, sentence
    ``leave_out`` (the query's own) left out."""
    rows = np.flatnonzero(np.asarray([s.word for s in data.sentences]) == word)
    senses = [data.sentences[k].sense for k in rows]
    skip = None if leave_out is None else int(np.flatnonzero(rows == leave_out)[0])
    means = {name: group_means(query[name], vectors[rows], senses, skip) for name, vectors in data.outputs.items()}
    return QueryScores(word, sense, text, means)


def leave_one_out(data: SenseVectors) -> List[QueryScores]:
    """Every sentence as the query against its word's other sentences, grouped by sense."""
    return [
        query_scores(data, s.word, s.sense, data.texts[i], {name: v[i] for name, v in data.outputs.items()}, i)
        for i, s in enumerate(data.sentences)
    ]


def query_target(doc: "Doc", words: Sequence[str]) -> "Token":
    """The first token of ``doc`` that is a data word; ValueError naming the query if none."""
    target = next((t for t in doc if t.lower_ in words), None)
    if target is None:
        raise ValueError(f"the query {doc.text!r} contains none of the sense data's words: {', '.join(words)}")
    return target


def score_user_queries(
    nlp: "Language", queries: Sequence[str], data: SenseVectors
) -> List[QueryScores]:
    """Each typed sentence against its first data word's sentences; ValueError if none."""
    words = list(dict.fromkeys(s.word for s in data.sentences))
    scores = []
    for doc in nlp.pipe(queries):
        target = query_target(doc, words)
        mine = {name: vectors[0] for name, vectors in output_vectors([target]).items()}
        scores.append(query_scores(data, target.lower_, None, mark(doc, target.i), mine))
    return scores


def demo_words(sentences: Sequence[SenseSentence]) -> List[str]:
    """The words shown by default: those whose senses differ in part of speech, what a small biLM
    separates (``benchmarks senses``); without ``pos``, every word."""
    words = list(dict.fromkeys(s.word for s in sentences))
    if sentences[0].pos is None:
        return words
    one_tag = has_one_tag([s.word for s in sentences], [s.pos for s in sentences])
    return [w for w in words if not one_tag[w]]


def first_of_each_sense(scores: Sequence[QueryScores], words: Sequence[str]) -> List[QueryScores]:
    """The table's rows: each word's first sentence of each sense (a fixed rule)."""
    seen = set()
    rows = []
    for word in words:
        for query in scores:
            if query.word == word and (word, query.sense) not in seen:
                seen.add((word, query.sense))
                rows.append(query)
    return rows


def count_wins(scores: Sequence[QueryScores], output: str) -> int:
    return sum(query.outcome(output) == "yes" for query in scores)


def table_rows(scores: Sequence[QueryScores]) -> List[Dict[str, Any]]:
    """One table row per query: own-sense and best-other-sense means and the outcome, per output."""
    rows = []
    for query in scores:
        row: Dict[str, Any] = {"word": query.word, "sense": query.sense, "query": query.text}
        for key, output in (("token", TOKEN_LAYER), ("context", IN_CONTEXT)):
            means = query.means[output]
            row[f"{key}_own"] = means[query.sense]
            row[f"{key}_other"] = max(v for s, v in means.items() if s != query.sense)
            row[f"{key}_wins"] = query.outcome(output)
        rows.append(row)
    return rows


TABLE_COLUMNS = [
    ("word", "word", ""),
    ("sense", "sense", ""),
    ("token_own", "token layer: own", ".3f"),
    ("token_other", "other", ".3f"),
    ("token_wins", "wins", ""),
    ("context_own", "in context: own", ".3f"),
    ("context_other", "other", ".3f"),
    ("context_wins", "wins", ""),
    ("query", "query (target in [ ])", ""),
]


def summary_lines(scores: Sequence[QueryScores], shown: Sequence[str], same_pos: Sequence[str]) -> List[str]:
    """Right-sense counts over the shown words, and over ``same_pos``, the words whose senses share
    a part of speech (in data order), unless all of them are shown."""
    lines = []
    groups = [(f"the {_words(len(shown))} above", set(shown))]
    if set(same_pos) - set(shown):
        groups.append(
            (f"the {_words(len(same_pos))} whose senses share a part of speech (e.g. {same_pos[0]})", set(same_pos))
        )
    for label, words in groups:
        group = [q for q in scores if q.word in words]
        lines.append(
            f"Right sense wins for {label}: in context {count_wins(group, IN_CONTEXT)} of "
            f"{len(group)} queries, token layer {count_wins(group, TOKEN_LAYER)} of {len(group)}"
        )
    lines.append(
        "(the token layer gives each word one vector, so its cosines tie; guessing would win "
        "about half)"
    )
    return lines


def _words(n: int) -> str:
    return f"{n} word" if n == 1 else f"{n} words"


def mark(doc: "Doc", i: int) -> str:
    """The text of ``doc`` with token ``i`` in brackets."""
    return "".join(
        f"[{token.text}]{token.whitespace_}" if token.i == i else token.text_with_ws for token in doc
    ).strip()


def format_user_query(query: QueryScores) -> str:
    """One line for a sentence the user typed: the mean cosine to each sense group, per output."""
    parts = []
    for output in (IN_CONTEXT, TOKEN_LAYER):
        means = ", ".join(f"{s} {v:.3f}" for s, v in query.means[output].items())
        parts.append(f"{output}: {means} -> {query.outcome(output)}")
    return f"Query: {query.text}\n  " + "\n  ".join(parts)


def demo(
    weights: Optional[str] = WEIGHTS,
    options_file: Optional[Path] = OPTIONS_FILE,
    weight_file: Optional[Path] = WEIGHT_FILE,
    words: List[str] = typer.Option(
        [],
        "--word",
        help="A word of the sense data to show (repeat for more; default: the words whose senses "
        "differ in part of speech)",
        show_default=False,
    ),
    queries: List[str] = typer.Option(
        [],
        "--query",
        help="Your own sentence using a word of the sense data, e.g. bank (repeat for more)",
        show_default=False,
    ),
    threads: int = typer.Option(1, "--threads", min=1, help=THREADS_HELP),
    precision: str = PRECISION,
) -> None:
    """Show which senses of ambiguous words the vectors tell apart, measured.

    Each sentence of the sense benchmark (data/senses.jsonl) is a query: its word's vector is compared
    with the word's other sentences, grouped by sense (mean cosine), in context and with the
    context-free token layer; the right sense wins when its group is closest.
    """
    from ..hub.cache import download_command
    from .senses import DATA_FILE, read_senses

    settings = weight_settings(weights, options_file, weight_file)
    nlp = elmo_pipeline({**settings, "threads": threads, "precision": precision}, "en")
    sentences = read_senses(DATA_FILE, nlp.tokenizer)
    known = list(dict.fromkeys(s.word for s in sentences))
    unknown = [w for w in words if w not in known]
    if unknown:
        fail(f"--word {', '.join(unknown)}: not in {DATA_FILE.name}; its words: {', '.join(known)}")
    with failing(ValueError):  # before the data is embedded and anything printed
        for query in queries:
            query_target(nlp.make_doc(query), known)
    differ = demo_words(sentences)
    shown = list(dict.fromkeys(words)) or differ
    with failing(ValueError):
        data = embed_sentences(nlp, sentences)
        mine = score_user_queries(nlp, queries, data)
    scores = leave_one_out(data)
    same_pos = [w for w in known if w not in differ]
    _echo_scores(nlp, scores, shown, same_pos, len(known), precision, chosen=bool(words))
    if weights is None and options_file is None and weight_file is None:
        typer.echo(
            "Senses with the same part of speech (bank: river / money) need a larger released "
            f"model: {download_command(RELEASED_FOR_MEANING)}, then add --weights "
            f"{RELEASED_FOR_MEANING}"
        )
    if mine:
        typer.echo("")
        for query in mine:
            typer.echo(format_user_query(query))


def _echo_scores(nlp, scores, shown: List[str], same_pos: List[str], n_known: int, precision: str, chosen: bool) -> None:
    """The model line, the legend, the table of first queries and the summary."""
    from .senses import DATA_FILE

    elmo = nlp.get_pipe("elmo")
    mix = ", ".join(f"{w:.2f}" for w in elmo.layer_weights())
    typer.echo(
        f"ELMo: {elmo.bilm.n_output_layers} layers of width {elmo.bilm.output_dim}, precision "
        f"{precision}; {IN_CONTEXT} = "
        f"the pipe's vectors (layer weights [{mix}], token layer first); token layer = layer 0, "
        "context-free\n"
    )
    rule = "chosen with --word" if chosen else "whose senses differ in part of speech"
    typer.echo(
        f"{len(shown)} of the {n_known} words of the sense benchmark ({DATA_FILE.name}), "
        f"those {rule}.\nEach row: a query sentence (the first of each sense); own / "
        "other = mean cosine of its word to the word in the other sentences of its own sense / of "
        "the other sense; wins = own is higher."
    )
    typer.echo(table(table_rows(first_of_each_sense(scores, shown)), TABLE_COLUMNS) + "\n")
    typer.echo("Every sentence of the data in turn as the query:")
    for line in summary_lines(scores, shown, same_pos):
        typer.echo(f"  {line}")
