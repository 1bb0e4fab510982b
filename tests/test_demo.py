"""The demo's scoring (``spacy_elmo.cli.demo``): mean cosine per sense group, leave one out, and the
rules that choose what the table shows. The command itself runs in test_cli.py."""

import numpy as np
import pytest

from spacy_elmo.cli.demo import (
    IN_CONTEXT,
    TOKEN_LAYER,
    QueryScores,
    SenseVectors,
    demo_words,
    first_of_each_sense,
    group_means,
    leave_one_out,
    summary_lines,
)
from spacy_elmo.cli.senses import DATA_FILE, SenseSentence, read_senses


def _sentence(word, sense, pos=None):
    return SenseSentence(word, sense, f"a {word}", ("a", word), 1, pos)


def test_group_means_by_hand_leaving_the_query_out():
    # Unit vectors at 0, 60 and 90 degrees from the query (lengths do not matter).
    vectors = np.array([[1.0, 0.0], [0.5, np.sqrt(3) / 2], [0.0, 3.0], [2.0, 0.0]])
    means = group_means(vectors[3], vectors, ["a", "a", "b", "b"], skip=3)
    assert means == pytest.approx({"a": (1.0 + 0.5) / 2, "b": 0.0})


def test_outcome_is_a_tie_when_the_groups_are_within_float_noise():
    def query(own, other):
        means = {"a": own, "b": other}
        return QueryScores("w", "a", "a [w]", {IN_CONTEXT: means, TOKEN_LAYER: means})

    assert query(0.8, 0.6).outcome(IN_CONTEXT) == "yes"
    assert query(0.6, 0.8).outcome(IN_CONTEXT) == "no"
    assert query(1.0, 1.0 - 1e-7).outcome(IN_CONTEXT) == "tie"
    typed = QueryScores("w", None, "[w]", {IN_CONTEXT: {"a": 0.2, "b": 0.5}})
    assert typed.outcome(IN_CONTEXT) == "b"  # no right sense: the nearest one is named


def test_leave_one_out_scores_every_sentence_and_ties_a_context_free_output():
    sentences = [_sentence("w", s) for s in "aabb"] + [_sentence("v", s) for s in "ccdd"]
    rng = np.random.default_rng(0)
    context = rng.normal(size=(8, 4))
    context_free = np.repeat(rng.normal(size=(2, 4)), 4, axis=0)  # one vector per word
    data = SenseVectors(sentences, [s.text for s in sentences], {IN_CONTEXT: context, TOKEN_LAYER: context_free})
    scores = leave_one_out(data)
    assert [(q.word, q.sense) for q in scores] == [(s.word, s.sense) for s in sentences]
    assert all(q.outcome(TOKEN_LAYER) == "tie" for q in scores)
    # The first query's own group is the one other "a" sentence.
    unit = context / np.linalg.norm(context, axis=1, keepdims=True)
    expected = {"a": unit[0] @ unit[1], "b": (unit[0] @ unit[2] + unit[0] @ unit[3]) / 2}
    assert scores[0].means[IN_CONTEXT] == pytest.approx(expected)


def test_the_demo_shows_words_by_a_rule_over_the_data():
    sentences = read_senses(DATA_FILE)
    words = demo_words(sentences)
    tags = {w: {s.pos for s in sentences if s.word == w} for w in words}
    assert len(words) >= 5 and all(len(t) > 1 for t in tags.values())
    others = {s.word for s in sentences} - set(words)
    assert all(len({s.pos for s in sentences if s.word == w}) == 1 for w in others)
    untagged = [_sentence("w", "a"), _sentence("v", "b")]
    assert demo_words(untagged) == ["w", "v"]  # no pos: every word


def test_the_table_takes_the_first_sentence_of_each_sense_and_the_summary_counts_all():
    sentences = [_sentence("w", s, p) for s, p in zip("aabb", ["NOUN", "NOUN", "VERB", "VERB"])]
    sentences += [_sentence("v", s, "NOUN") for s in "ccdd"]
    rng = np.random.default_rng(1)
    outputs = {IN_CONTEXT: rng.normal(size=(8, 4)), TOKEN_LAYER: np.ones((8, 4))}
    scores = leave_one_out(SenseVectors(sentences, [s.text for s in sentences], outputs))
    rows = first_of_each_sense(scores, ["w"])
    assert [(q.word, q.sense) for q in rows] == [("w", "a"), ("w", "b")]
    assert rows[0] is scores[0] and rows[1] is scores[2]
    assert demo_words(sentences) == ["w"]  # v's senses share a part of speech
    lines = summary_lines(scores, ["w"], ["v"])
    wins_w = sum(q.outcome(IN_CONTEXT) == "yes" for q in scores[:4])
    assert f"the 1 word above: in context {wins_w} of 4 queries, token layer 0 of 4" in lines[0]
    assert "share a part of speech (e.g. v)" in lines[1] and "of 4 queries" in lines[1]
