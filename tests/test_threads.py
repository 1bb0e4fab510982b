"""The pipe's ``threads`` setting: the biLM runs on that many PyTorch threads, and the caller's
own ``torch.get_num_threads()`` is what it was after the call."""

import pytest
import spacy
import torch

from spacy_elmo.nn.threads import torch_threads


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _threads_seen_by_the_bilm(nlp) -> list:
    """The thread count in force each time the biLM's forward runs (a forward hook records it)."""
    seen = []
    nlp.get_pipe("elmo").bilm.register_forward_hook(lambda *_: seen.append(torch.get_num_threads()))
    return seen


def test_torch_threads_restores_the_setting(two_threads):
    with torch_threads(1) as n:
        assert n == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError):
        with torch_threads(1):
            raise RuntimeError("an error inside the block")
    assert torch.get_num_threads() == 2
    with torch_threads(None) as n:
        assert n == 2


@pytest.mark.parametrize("threads, expected", [(None, 2), (1, 1)])
def test_pipe_runs_on_its_threads_and_restores_the_callers(fixture_files, two_threads, threads, expected):
    options, weights = fixture_files
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"options_file": str(options), "weight_file": str(weights), "threads": threads})
    seen = _threads_seen_by_the_bilm(nlp)
    list(nlp.pipe(["One doc .", "Another doc ."]))
    assert seen and set(seen) == {expected}
    assert torch.get_num_threads() == 2


def test_default_is_one_thread(fixture_files, two_threads):
    options, weights = fixture_files
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"options_file": str(options), "weight_file": str(weights)})
    seen = _threads_seen_by_the_bilm(nlp)
    nlp("Default settings .")
    assert seen == [1] and torch.get_num_threads() == 2


@pytest.mark.parametrize("bad", [0, -1])  # 1.5: spaCy's config validation names the key
def test_bad_threads_name_the_key(fixture_files, bad):
    options, weights = fixture_files
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match="elmo pipe 'elmo': threads must be a positive integer"):
        nlp.add_pipe("elmo", config={"options_file": str(options), "weight_file": str(weights), "threads": bad})
