"""Length batching (``spacy_elmo.batching``): the one routine behind the pipe's and pretraining's
batches."""

from __future__ import annotations

from spacy_elmo.batching import batch_by_length, pack_by_length, pack_sequences


def _padded(lengths, group, overhead=0):
    return len(group) * max(lengths[i] + overhead for i in group)


def test_batches_keep_the_given_order_and_bound_the_padded_size():
    lengths = [2, 3, 3, 5, 8]
    groups = pack_by_length(lengths, max_tokens=10)
    assert groups == [[0, 1, 2], [3], [4]]
    assert [i for g in groups for i in g] == list(range(len(lengths)))
    assert all(_padded(lengths, g) <= 10 for g in groups)


def test_overhead_counts_per_row():
    """Pretraining adds <S> and </S> to every row: 3 rows of 2 + 2 tokens exceed 10."""
    assert pack_by_length([2, 2, 2], 10, overhead=2) == [[0, 1], [2]]
    assert pack_by_length([2, 2, 2], 12, overhead=2) == [[0, 1, 2]]


def test_a_sequence_longer_than_the_budget_is_a_batch_of_its_own():
    assert pack_by_length([1, 50, 1], 10) == [[0], [1], [2]]


def test_pack_sequences_returns_the_sequences():
    sequences = [["a"], ["b", "c"], ["d", "e"], ["f", "g", "h", "i"]]
    assert pack_sequences(sequences, 6) == [[["a"], ["b", "c"], ["d", "e"]], [["f", "g", "h", "i"]]]


def test_batch_by_length_groups_longest_first():
    lengths = [1, 7, 3, 7, 2]
    groups = batch_by_length(lengths, max_tokens=14)
    assert groups == [[1, 3], [2, 4, 0]]
    assert all(_padded(lengths, g) <= 14 for g in groups)
