"""options.json parsing: released files load, bad ones name the key at fault."""

import json

import pytest

from conftest import make_options, write_random_bilm_tf
from spacy_elmo import BiLMOptions, OptionsError, load_bilm


def test_released_fixture_options(fixture_files):
    options = BiLMOptions.from_file(fixture_files[0])
    assert options.char_cnn.filters == ((1, 4), (2, 8), (3, 16), (4, 32), (5, 64))
    assert options.char_cnn.n_filters == 124 and options.char_cnn.n_highway == 2
    assert options.lstm.cell_clip == 3.0 and options.lstm.proj_clip == 3.0
    assert options.output_dim == 32 and options.n_output_layers == 3


def test_round_trip_through_dict():
    options = BiLMOptions.from_dict(make_options(activation="tanh", n_layers=3))
    assert BiLMOptions.from_dict(options.to_dict()) == options


def test_training_keys_are_ignored_and_zero_clip_means_none():
    data = make_options(clip=0)
    data.update(batch_size=128, n_epochs=10, dropout=0.1, bidirectional=True, unroll_steps=20)
    options = BiLMOptions.from_dict(data)
    assert options.lstm.cell_clip is None and options.lstm.proj_clip is None


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda o: o["char_cnn"].update(activation="gelu"), "char_cnn.activation"),
        (lambda o: o["lstm"].pop("dim"), "lstm.dim"),
        (lambda o: o["lstm"].update(n_layers=0), "lstm.n_layers"),
        (lambda o: o["char_cnn"].update(filters=[[1, 4], [2]]), r"char_cnn.filters\[1\]"),
        (lambda o: o["char_cnn"].update(max_characters_per_token=2), r"char_cnn.filters\[2\] must be \[width <= 2"),
        (lambda o: o["char_cnn"].update(n_characters=0), "char_cnn.n_characters must be >= 2, got 0"),
        (lambda o: o["char_cnn"].update(word_dim=-1), "char_cnn.word_dim must be >= 0, got -1"),
        (lambda o: o["lstm"].update(cell_clip=-1), "lstm.cell_clip"),
        (lambda o: o["lstm"].update(cell_clip=float("nan")), "lstm.cell_clip.*nan"),
        (lambda o: o["lstm"].update(proj_clip=float("inf")), "lstm.proj_clip.*inf"),
        (lambda o: o["lstm"].update(cell_clip=False), "lstm.cell_clip.*False"),
        (lambda o: o["lstm"].update(projection_dim=12), r"projection_dim \(12\) must be smaller than lstm.dim \(12\)"),
        (lambda o: o["lstm"].update(use_skip_connections="yes"), "use_skip_connections"),
        (lambda o: o.pop("lstm"), "missing section 'lstm'"),
        (lambda o: o.update(bidirectional=False), "bidirectional must be true"),
    ],
)
def test_bad_options_name_the_key(tmp_path, edit, message):
    data = make_options()
    edit(data)
    path = tmp_path / "options.json"
    path.write_text(json.dumps(data))
    with pytest.raises(OptionsError, match=message) as info:
        BiLMOptions.from_file(path)
    assert str(path) in str(info.value)


def test_a_bad_filter_is_the_one_error_named():
    """A bad item of ``filters`` is the error; pydantic's "too short" count of the items left after
    validation is not a second one. An empty list still is."""
    data = make_options()
    data["char_cnn"]["filters"] = [[1, True]]
    with pytest.raises(OptionsError) as info:
        BiLMOptions.from_dict(data)
    assert "char_cnn.filters[0][1] must be a valid integer, got True" in str(info.value)
    assert "at least 1 item" not in str(info.value)
    data["char_cnn"]["filters"] = []
    with pytest.raises(OptionsError, match="char_cnn.filters .*at least 1 item"):
        BiLMOptions.from_dict(data)


def test_skip_connections_off_warns_and_is_kept():
    with pytest.warns(UserWarning, match="without residual connections"):
        options = BiLMOptions.from_dict(make_options(use_skip_connections=False))
    assert options.lstm.use_skip_connections is False


def test_unreadable_options_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="options file not found"):
        BiLMOptions.from_file(tmp_path / "nope.json")
    path = tmp_path / "options.json"
    path.write_text("{not json")
    with pytest.raises(OptionsError, match="not a valid JSON"):
        BiLMOptions.from_file(path)


def test_options_that_are_not_an_object(tmp_path):
    path = tmp_path / "options.json"
    path.write_text("[1, 2]")
    with pytest.raises(OptionsError, match="options.json: expected a JSON object, got list"):
        BiLMOptions.from_file(path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (dict(max_characters_per_token=30), "char_cnn.max_characters_per_token must be 50 .the released character mapping"),
        (dict(n_characters=300), r"char_cnn.n_characters must be 261 \(training\) or 262 \(inference\), got 300"),
        (dict(word_dim=8), "char_cnn.word_dim is 8, but the released character mapping has no word ids"),
    ],
)
def test_released_files_need_the_released_character_mapping(tmp_path, edit, message):
    """The options describe any shape; a bilm-tf file reads UTF-8 byte ids, and its reader refuses
    options that do not fit them, naming the file and the key."""
    options, weights = write_random_bilm_tf(tmp_path, make_options())
    data = json.loads(options.read_text())
    data["char_cnn"].update(edit)
    options.write_text(json.dumps(data))
    with pytest.raises(OptionsError, match=message) as info:
        load_bilm(options, weights)
    assert str(options) in str(info.value)
