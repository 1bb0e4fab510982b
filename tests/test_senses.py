"""The sense benchmark (``python -m benchmarks senses``): its data (``spacy_elmo.cli.senses``), its
two figures, and the bundled model.

The figures are checked against a four-vector example computed by hand and against a pair-by-pair
NumPy loop; the bundled model must show what a context-free layer cannot do.
"""

import itertools
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
import spacy
import srsly

from benchmarks.senses import (
    PIPE_DEFAULT,
    POINT_VARIANCE,
    candidate_outputs,
    draw_projection,
    layer_norm,
    per_word_rows,
    plot_words,
    project_2d,
    run_senses_bench,
    sense_projection,
    sense_scores,
    word_scores,
)
from conftest import checkout_pythonpath
from spacy_elmo import DEFAULT_MODEL, load_bilm
from spacy_elmo.cli.senses import DATA_FILE, HELDOUT_FILE, has_one_tag, read_senses

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("path", [DATA_FILE, HELDOUT_FILE], ids=["main", "heldout"])
def test_data_file_is_well_formed(path):
    records = list(srsly.read_jsonl(path))
    tokenizer = spacy.blank("en").tokenizer
    senses = defaultdict(Counter)
    for record in records:
        tokens = [t.text for t in tokenizer(record["text"])]
        assert tokens.count(record["word"]) == 1, record
        senses[record["word"]][record["sense"]] += 1
    assert len(senses) >= 24
    for word, counts in senses.items():
        assert len(counts) >= 2 and min(counts.values()) >= 4, (word, counts)
    assert len({r["text"] for r in records}) == len(records), "a sentence is repeated"
    sentences = read_senses(path)
    assert len(sentences) == len(records)
    assert all(s.tokens[s.target] == s.word for s in sentences)
    # Both groups of the POS split have words: the one syntax separates and the one it cannot.
    tags = defaultdict(set)
    for s in sentences:
        tags[s.word].add(s.pos)
    assert sum(len(t) == 1 for t in tags.values()) >= 12
    assert sum(len(t) > 1 for t in tags.values()) >= 5


def test_heldout_words_are_not_in_the_main_set():
    main = {s.word for s in read_senses(DATA_FILE)}
    heldout = {s.word for s in read_senses(HELDOUT_FILE)}
    assert len(heldout) >= 24 and not main & heldout


@pytest.mark.parametrize(
    "second_text, error",
    [
        # The target word twice: the line is named.
        ("A bank by a bank.", r"line 2: 'bank' is 2 tokens"),
        # One sense only: no across-sense pairs.
        ("A grassy bank.", r"expected >= 2 senses"),
        # A part of speech that is not a UD tag, or given on some lines only.
        ({"text": "A grassy bank.", "pos": "NN"}, r"line 2: pos 'NN' is not a Universal"),
        ({"text": "A grassy bank.", "pos": "NOUN"}, r"1 of 2 lines give pos"),
    ],
    ids=["word-twice", "one-sense", "not-upos", "pos-on-some-lines"],
)
def test_read_senses_refuses_bad_data(tmp_path, second_text, error):
    path = tmp_path / "bad.jsonl"
    second = second_text if isinstance(second_text, dict) else {"text": second_text}
    srsly.write_jsonl(
        path,
        [
            {"word": "bank", "sense": "river", "text": "The bank of the river."},
            {"word": "bank", "sense": "river", **second},
        ],
    )
    with pytest.raises(ValueError, match=error):
        read_senses(path)


def test_word_scores_by_hand():
    # Unit vectors (then scaled: cosines ignore length); cosines are dot products:
    # a1.a2 = 0.6, b1.b2 = 0.8 -> within 0.7
    # a1.b1 = 0, a1.b2 = -0.6, a2.b1 = 0.8, a2.b2 = 0.28 -> across 0.12; margin 0.58
    # nearest: a1 -> a2 (right), a2 -> b1 (wrong), b1 -> a2 and b2 tie at 0.8 (half right),
    # b2 -> b1 (right): accuracy (1 + 0 + 0.5 + 1) / 4 = 0.625
    vectors = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [-0.6, 0.8]]) * [[1], [2], [3], [0.5]]
    scores = word_scores(vectors, ["a", "a", "b", "b"])
    assert scores["within"] == pytest.approx(0.7)
    assert scores["across"] == pytest.approx(0.12)
    assert scores["margin"] == pytest.approx(0.58)
    assert scores["accuracy"] == pytest.approx(0.625)


def test_float_noise_ties_give_the_chance_level():
    # One vector per occurrence, equal up to float32 rounding noise (as a context-free layer run
    # in different batches may give): every neighbour ties, 1 of 3 others has the same sense.
    rng = np.random.default_rng(2)
    vectors = np.ones((4, 8)) + rng.normal(scale=1e-7, size=(4, 8))
    scores = word_scores(vectors, ["a", "a", "b", "b"])
    assert scores["accuracy"] == pytest.approx(1 / 3)
    assert abs(scores["margin"]) < 1e-9


def _pairwise_reference(vectors, senses):
    """The same figures from an explicit loop over pairs and neighbours."""
    cos = lambda u, v: float(u @ v / np.linalg.norm(u) / np.linalg.norm(v))  # noqa: E731
    within, across = [], []
    for i, j in itertools.combinations(range(len(senses)), 2):
        (within if senses[i] == senses[j] else across).append(cos(vectors[i], vectors[j]))
    hits = 0
    for i in range(len(senses)):
        others = [j for j in range(len(senses)) if j != i]
        nearest = max(others, key=lambda j: cos(vectors[i], vectors[j]))
        hits += senses[nearest] == senses[i]
    return np.mean(within) - np.mean(across), hits / len(senses)


def test_sense_scores_match_a_pairwise_loop_and_average_over_words():
    rng = np.random.default_rng(0)
    words = ["x"] * 7 + ["y"] * 10
    senses = ["p", "p", "p", "q", "q", "q", "q"] + ["p"] * 5 + ["q"] * 3 + ["r"] * 2
    centres = {(w, s): rng.normal(size=16) for w, s in zip(words, senses)}
    noise = rng.normal(scale=1.5, size=(len(words), 16))
    vectors = np.stack([centres[w, s] for w, s in zip(words, senses)]) + noise
    result = sense_scores(vectors, words, senses)
    expected = {w: _pairwise_reference(vectors[[i for i, x in enumerate(words) if x == w]],
                                       [s for x, s in zip(words, senses) if x == w]) for w in "xy"}
    for w in "xy":
        assert result["per_word"][w]["margin"] == pytest.approx(expected[w][0])
        assert result["per_word"][w]["accuracy"] == pytest.approx(expected[w][1])
    assert result["margin"] == pytest.approx((expected["x"][0] + expected["y"][0]) / 2)
    assert result["accuracy"] == pytest.approx((expected["x"][1] + expected["y"][1]) / 2)
    assert "margin_same_pos" not in result


def test_sense_scores_split_the_margin_by_part_of_speech():
    rng = np.random.default_rng(1)
    words = ["x"] * 4 + ["y"] * 4 + ["z"] * 4
    senses = ["p", "p", "q", "q"] * 3
    # x: one tag throughout; y and z: each sense its own tag (z's second sense is mixed).
    pos = ["NOUN"] * 4 + ["NOUN", "NOUN", "VERB", "VERB"] + ["NOUN", "NOUN", "ADJ", "NOUN"]
    vectors = rng.normal(size=(12, 8))
    result = sense_scores(vectors, words, senses, pos)
    margin = {w: result["per_word"][w]["margin"] for w in "xyz"}
    assert result["margin_same_pos"] == pytest.approx(margin["x"])
    assert result["margin_pos_differs"] == pytest.approx((margin["y"] + margin["z"]) / 2)
    only_nouns = sense_scores(vectors[:4], words[:4], senses[:4], pos[:4])
    assert only_nouns["margin_pos_differs"] is None


def test_layer_norm_standardises_each_layer():
    rng = np.random.default_rng(1)
    layers = rng.normal(loc=[[[3.0]], [[-2.0]]], scale=[[[5.0]], [[0.1]]], size=(2, 4, 8))
    normed = layer_norm(layers)
    assert np.allclose(normed.mean(axis=(1, 2)), 0) and np.allclose(normed.std(axis=(1, 2)), 1)


def test_candidate_outputs_mix_and_center_on_the_reference():
    rng = np.random.default_rng(3)
    layers = [rng.normal(size=(3, n, 4)) for n in (2, 5)]
    reference = [rng.normal(loc=7.0, size=(3, n, 4)) for n in (3, 4)]
    outputs = candidate_outputs(layers, reference)
    contextual = (layers[1][1] + layers[1][2]) / 2
    assert np.allclose(outputs["contextual mix"][1], contextual)
    assert np.allclose(outputs["equal mix"][0], layers[0].mean(axis=0))
    assert np.allclose(outputs["layer 2 (top)"][0], layers[0][2])
    assert np.allclose(outputs["layer 1 forward"][1], layers[1][1][:, :2])
    assert np.allclose(outputs["layer 2 backward"][0], layers[0][2][:, 2:])
    assert "layer 0 forward" not in outputs  # the token layer is [x; x]: both halves are x
    reference_mean = np.concatenate([(x[1] + x[2]) / 2 for x in reference]).mean(axis=0)
    assert np.allclose(outputs["contextual mix, centered"][1], contextual - reference_mean)
    own_mean = np.concatenate([(x[1] + x[2]) / 2 for x in layers]).mean(axis=0)
    centered_on_itself = candidate_outputs(layers)["contextual mix, centered"][1]
    assert np.allclose(centered_on_itself, contextual - own_mean)


@pytest.fixture(scope="module", params=[DATA_FILE, HELDOUT_FILE], ids=["main", "heldout"])
def bundled_result(request):
    if not (DEFAULT_MODEL / "options.json").is_file():
        pytest.skip(f"the bundled model is not in this checkout ({DEFAULT_MODEL})")
    rows = run_senses_bench(load_bilm(DEFAULT_MODEL), request.param)["rows"]
    return {row["output"]: row for row in rows}


def test_bundled_token_layer_is_context_free(bundled_result):
    token = bundled_result["layer 0 (token)"]
    assert abs(token["margin"]) < 1e-6
    for scores in token["per_word"].values():
        assert scores["within"] == pytest.approx(1.0, abs=1e-6)
        assert scores["across"] == pytest.approx(1.0, abs=1e-6)
    # Every other occurrence ties: 3 of the 7 have the same sense.
    assert token["accuracy"] == pytest.approx(3 / 7)


def test_bundled_contextual_layers_separate_senses(bundled_result):
    for name in ("layer 1", "layer 2 (top)", "contextual mix", "equal mix"):
        assert bundled_result[name]["margin"] > 0, name
        assert bundled_result[name]["accuracy"] > 3 / 7, name


def test_pipe_default_mix_separates_senses_better_than_the_equal_mix(bundled_result):
    """Why ``mix_weights = null`` leaves the token layer out, on both sentence sets."""
    contextual, equal = bundled_result["contextual mix"], bundled_result["equal mix"]
    assert contextual["margin"] > 1.3 * equal["margin"]


def test_per_word_rows_are_the_words_behind_a_row(bundled_result):
    row = bundled_result[PIPE_DEFAULT]
    words = per_word_rows(row)
    assert sorted(w["output"] for w in words) == sorted(row["per_word"])
    margins = [w["margin"] for w in words]
    assert margins == sorted(margins)
    assert np.mean(margins) == pytest.approx(row["margin"])
    assert np.mean([w["accuracy"] for w in words]) == pytest.approx(row["accuracy"])


def test_cli_per_word_prints_every_word(tmp_path):
    if not (DEFAULT_MODEL / "options.json").is_file():
        pytest.skip(f"the bundled model is not in this checkout ({DEFAULT_MODEL})")
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "senses", "--heldout", "--per-word"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stderr
    per_word = run.stdout.split("Per word, contextual mix")[1]
    for word in {s.word for s in read_senses(HELDOUT_FILE)}:
        assert f"\n{word} " in per_word, word


def test_cli_writes_json(tmp_path):
    if not (DEFAULT_MODEL / "options.json").is_file():
        pytest.skip(f"the bundled model is not in this checkout ({DEFAULT_MODEL})")
    out = tmp_path / "senses.json"
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "senses", "--output", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stderr
    assert "contextual mix" in run.stdout and "equal mix" in run.stdout
    result = srsly.read_json(out)
    assert result["data"]["words"] >= 24
    data = result["data"]
    assert data["words_same_pos"] + data["words_pos_differs"] == data["words"]
    assert "margin, same POS" in run.stdout
    names = [row["output"] for row in result["rows"]]
    assert "layer 0 (token)" in names and "contextual mix" in names
    assert all(set(row) >= {"margin", "accuracy", "per_word"} for row in result["rows"])


def test_cli_heldout_and_data_are_exclusive(tmp_path):
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "senses", "--heldout", "--data", str(DATA_FILE)],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )
    assert run.returncode != 0 and "--heldout and --data" in run.stderr + run.stdout


# ------------------------------------------------------------------- --plot: the projection's data


def test_project_2d_keeps_the_distances_of_planar_unit_vectors():
    # Unit vectors in one plane of a 6-D space: two components hold all the variance, and the
    # projection is a rotation of them, so distances between occurrences are kept.
    rng = np.random.default_rng(4)
    angles = rng.uniform(0, 2 * np.pi, size=9)
    basis = np.linalg.qr(rng.normal(size=(6, 2)))[0].T
    vectors = np.stack([np.cos(angles), np.sin(angles)], axis=1) @ basis * rng.uniform(1, 5, (9, 1))
    coords, explained, variance = project_2d(vectors)
    assert coords.shape == (9, 2) and sum(explained) == pytest.approx(1.0)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    distances = lambda x: np.linalg.norm(x[:, None] - x[None], axis=-1)  # noqa: E731
    assert np.allclose(distances(coords), distances(unit))
    assert variance == pytest.approx(((unit - unit.mean(0)) ** 2).sum() / 9)


def test_project_2d_draws_one_vector_per_word_as_one_point():
    # The token layer: the same vector for every occurrence, up to float32 noise.
    vectors = np.ones((8, 16)) + np.random.default_rng(5).normal(scale=1e-7, size=(8, 16))
    coords, explained, variance = project_2d(vectors)
    assert variance < POINT_VARIANCE and explained == [0.0, 0.0]
    assert not coords.any()


def test_plot_words_follow_the_rule_over_the_data():
    sentences = read_senses(DATA_FILE)
    words = plot_words(sentences)
    one_tag = has_one_tag([s.word for s in sentences], [s.pos for s in sentences])
    in_order = list(dict.fromkeys(s.word for s in sentences))
    assert words == [w for w in in_order if not one_tag[w]][:2] + [w for w in in_order if one_tag[w]][:2]


@pytest.fixture(scope="module")
def bundled_projection():
    if not (DEFAULT_MODEL / "options.json").is_file():
        pytest.skip(f"the bundled model is not in this checkout ({DEFAULT_MODEL})")
    return sense_projection(load_bilm(DEFAULT_MODEL))


def test_projection_has_a_panel_per_word_and_output_with_every_occurrence(bundled_projection):
    projection = bundled_projection
    sentences = read_senses(DATA_FILE)
    assert projection["outputs"][0] == "layer 0 (token)" and PIPE_DEFAULT in projection["outputs"]
    assert len(projection["panels"]) == len(projection["words"]) * len(projection["outputs"])
    for panel in projection["panels"]:
        mine = [s for s in sentences if s.word == panel["word"]]
        # Every occurrence once, with the sense the data file gives it.
        assert len(panel["x"]) == len(panel["y"]) == len(mine)
        assert panel["senses"] == [s.sense for s in mine]
        assert panel["texts"] == [s.text for s in mine]
        assert all(0.0 <= f <= 1.0 for f in panel["explained"]) and sum(panel["explained"]) <= 1 + 1e-9
    one_tag = has_one_tag([s.word for s in sentences], [s.pos for s in sentences])
    assert projection["pos_differs"] == {w: not one_tag[w] for w in projection["words"]}
    srsly.json_dumps(projection)  # what --output writes


def test_projection_shows_the_token_layer_as_one_point_and_layers_apart(bundled_projection):
    panels = {(p["word"], p["output"]): p for p in bundled_projection["panels"]}
    for word in bundled_projection["words"]:
        token = panels[word, "layer 0 (token)"]
        assert token["variance"] < POINT_VARIANCE and not any(token["x"] + token["y"])
        layer_1, top = panels[word, "layer 1"], panels[word, "layer 2 (top)"]
        assert layer_1["variance"] > 0.01 and top["variance"] > 0.01
        assert not np.allclose(np.abs(layer_1["x"]), np.abs(top["x"]))  # each layer its own fit


def test_draw_projection_writes_a_png(bundled_projection, tmp_path, matplotlib):
    path = draw_projection(bundled_projection, tmp_path / "plots" / "senses.png", "bundled")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_plot_writes_the_png_and_its_data(tmp_path, matplotlib):
    if not (DEFAULT_MODEL / "options.json").is_file():
        pytest.skip(f"the bundled model is not in this checkout ({DEFAULT_MODEL})")
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1"}
    png, out = tmp_path / "senses.png", tmp_path / "senses.json"
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "senses", "--plot", str(png), "--output", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stderr
    assert png.stat().st_size > 0 and f"wrote {png}" in run.stdout
    projection = srsly.read_json(out)["projection"]
    assert projection["words"] == plot_words(read_senses(DATA_FILE))
