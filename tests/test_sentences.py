"""The sentence splitter (``spacy_elmo.sentences``) used for training text and benchmark text."""

from __future__ import annotations

from spacy_elmo.sentences import SENTENCE_END, split_sentences, windows


def test_cuts_after_sentence_final_punctuation():
    tokens = "It rained . Did it ? Yes !".split()
    assert split_sentences(tokens) == [["It", "rained", "."], ["Did", "it", "?"], ["Yes", "!"]]


def test_a_run_of_punctuation_stays_with_its_sentence():
    assert split_sentences("Really ? ! Yes".split()) == [["Really", "?", "!"], ["Yes"]]


def test_long_sentences_become_windows():
    tokens = "a b c d e f g .".split()
    assert split_sentences(tokens, max_length=3) == [["a", "b", "c"], ["d", "e", "f"], ["g", "."]]
    assert list(windows(tokens, 5)) == [tokens[:5], tokens[5:]]


def test_text_without_punctuation_is_one_sentence():
    assert split_sentences(["no", "end"]) == [["no", "end"]]
    assert split_sentences([]) == []
    assert {".", "!", "?"} <= SENTENCE_END and "," not in SENTENCE_END


def test_cjk_arabic_and_devanagari_sentences_are_cut_too():
    assert split_sentences("我 喜欢 猫 。 他 呢 ？".split()) == [["我", "喜欢", "猫", "。"], ["他", "呢", "？"]]
    assert split_sentences("هل أنت بخير ؟ نعم".split()) == [["هل", "أنت", "بخير", "؟"], ["نعم"]]
    assert split_sentences("यह अच्छा है । हाँ".split()) == [["यह", "अच्छा", "है", "।"], ["हाँ"]]
