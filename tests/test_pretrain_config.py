"""The pretraining config (``spacy_elmo.pretrain.config``): a confection file validated into typed
settings whose errors name the key, the expectation and the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from spacy_elmo.pretrain import load_config
from spacy_elmo.pretrain.config import ConfigError, parse_settings

REPO = Path(__file__).resolve().parents[1]


def _settings(**overrides):
    return parse_settings(load_config(None, {"paths.train": "train.txt", **overrides}))


def test_the_default_config_parses_to_its_own_values():
    settings = _settings()
    config = load_config(None, {"paths.train": "train.txt"})
    for section, values in config.interpolate().items():
        if section == "paths":
            continue
        parsed = getattr(settings, section)
        for key, value in values.items():
            assert getattr(parsed, key) == value, f"{section}.{key}"
    assert settings.system.threads == 1
    assert settings.options.lstm.dim == config["model"]["lstm_dim"]
    assert settings.config == config  # what the run writes as config.cfg


@pytest.mark.parametrize(
    "override, message",
    [
        ({"training.batch_tokens": -3}, r"^training\.batch_tokens must be >= 1, got -3$"),
        ({"training.precision": "int8"}, r"^training\.precision must be 'fp32', 'tf32', 'bf16' or 'fp16', got 'int8'$"),
        ({"objective.dropout": 1.0}, r"^objective\.dropout must be < 1, got 1.0$"),
        ({"objective.softmax": "hierarchical"}, r"^objective\.softmax must be 'auto', 'full' or 'sampled'"),
        ({"objective.sparse_updates": 1}, r'^objective\.sparse_updates must be "auto", true or false, got 1$'),
        ({"corpus.on_decode_error": "ignore"}, r"^corpus\.on_decode_error must be 'skip' or 'raise', got 'ignore'$"),
        ({"corpus.max_sequence_length": 0}, r"^corpus\.max_sequence_length must be >= 1, got 0$"),
        ({"corpus.lang": "zz"}, r"^corpus\.lang must be a language spaCy has \(e.g. 'en', .*\), got 'zz'$"),
        ({"paths.train": None}, r"^corpus\.train must name the training text"),
        ({"model.lstm_dim": "512"}, r"^model\.lstm_dim must be a valid integer, got '512'$"),
        ({"model.n_highway": True}, r"^model\.n_highway must be a valid integer, got True$"),
        ({"vocab.size": 3}, r"^vocab\.size must be >= 4, got 3$"),
        ({"optimizer.warmup_steps": -1}, r"^optimizer\.warmup_steps must be >= 0, got -1$"),
        ({"system.threads": -2}, r'^system\.threads must be an integer >= 1 or "auto", got -2$'),
        ({"system.threads": 0}, r'^system\.threads must be an integer >= 1 or "auto", got 0$'),
        ({"initialize.softmax_only_steps": -1}, r"^initialize\.softmax_only_steps must be >= 0, got -1$"),
        ({"training.batch_token": 100}, r"^training\.batch_token is not a known key \(known: batch_tokens, "),
        # what keys need of each other, found when the config is read, before the corpus is counted
        ({"training.step": "compile"}, r'^\[training\] step = "compile" needs batches of fixed shape: set \[corpus\] batching = "windows"'),
        (
            {"training.step": "cuda_graph", "corpus.batching": "windows", "training.precision": "fp16"},
            r'^\[training\] step = "cuda_graph" does not run with precision "fp16"',
        ),
        (
            {"corpus.batching": "windows", "corpus.window_length": 20, "training.batch_tokens": 10},
            r"^training.batch_tokens \(10\) must hold at least one window of corpus.window_length \(20\) tokens$",
        ),
    ],
)
def test_errors_name_the_key_what_is_expected_and_the_value(override, message):
    with pytest.raises(ConfigError, match=message):
        _settings(**override)


def test_every_wrong_key_is_reported_at_once():
    config = load_config(None, {"paths.train": "train.txt", "training.max_steps": 0})
    del config["training"]["log_every"]
    config["trainig"] = {}
    with pytest.raises(ConfigError) as err:
        parse_settings(config)
    assert str(err.value).split("; ") == [
        "training.max_steps must be >= 1, got 0",
        "training.log_every is missing",
        "trainig is not a known key (known: paths, system, model, corpus, vocab, objective, optimizer, initialize, training)",
    ]


def test_keys_newer_than_a_config_take_their_defaults():
    """Run directories written before [initialize], objective.sparse_updates and system.threads
    existed still parse (and resume) with the values they ran with."""
    config = load_config(None, {"paths.train": "train.txt"})
    del config["initialize"], config["objective"]["sparse_updates"], config["system"]["threads"]
    settings = parse_settings(config)
    assert settings.initialize.bilm is None and settings.objective.sparse_updates == "auto"
    assert settings.system.threads == 1


def test_the_project_pretraining_config_parses():
    settings = parse_settings(
        load_config(REPO / "project" / "configs" / "pretrain_wikitext2.cfg", {"paths.train": "t.txt"})
    )
    assert settings.objective.softmax == "sampled" and settings.vocab.size == 40000


def test_an_override_reaches_the_keys_that_refer_to_it_and_a_run_keeps_the_reference():
    """confection sets overrides before it resolves ``${...}``: ``paths.train`` reaches
    ``corpus.train``, and the config a run writes keeps ``corpus.train = ${paths.train}``."""
    config = load_config(None, {"paths.train": "train.txt"})
    assert config["corpus"]["train"] == "${paths.train}"
    assert parse_settings(config).corpus.train == "train.txt"
    assert parse_settings(config).written_config()["corpus"]["train"] == "${paths.train}"


def test_overrides_must_name_an_existing_section_and_key():
    """A section the config lacks is refused by confection, a key by the section's schema."""
    with pytest.raises(ConfigError, match=r"^override 'trainig.max_steps' does not name a key of a section of the "
                       r"default config \(its sections: paths, system, model, corpus, vocab, objective, optimizer, "):
        load_config(None, {"trainig.max_steps": 3})
    with pytest.raises(ConfigError, match=r"^training\.max_stepz is not a known key \(known: "):
        parse_settings(load_config(None, {"paths.train": "x.txt", "training.max_stepz": 3}))


def test_init_config_recipes_are_the_default_config_with_their_settings(tmp_path):
    """``--recipe``: the documented default (comments kept) with the recipe's keys set, read back
    as confection sets them on the default config, ``${...}`` references kept; "fast"
    is "bilm-tf" without clipping; an unknown name is refused with the names there are."""
    from typer.testing import CliRunner

    from spacy_elmo.cli import app
    from spacy_elmo.pretrain.config import RECIPES

    runner = CliRunner()
    settings = {}
    for recipe in ("bilm-tf", "fast"):
        result = runner.invoke(app, ["init-config", str(tmp_path / f"{recipe}.cfg"), "--recipe", recipe])
        assert result.exit_code == 0, result.output
        text = (tmp_path / f"{recipe}.cfg").read_text()
        assert "# Start from an existing biLM" in text
        assert load_config(tmp_path / f"{recipe}.cfg") == load_config(None, RECIPES[recipe])
        settings[recipe] = parse_settings(load_config(tmp_path / f"{recipe}.cfg", {"paths.train": "x.txt"}))
    bilm_tf, fast = settings["bilm-tf"], settings["fast"]
    assert (bilm_tf.options.lstm.cell_clip, bilm_tf.options.lstm.proj_clip) == (3.0, 3.0)
    assert (fast.options.lstm.cell_clip, fast.options.lstm.proj_clip) == (None, None)
    assert bilm_tf.options.lstm.dim == 4096 and bilm_tf.corpus.batching == "windows"
    assert bilm_tf.optimizer.name == "adagrad" and bilm_tf.objective.n_negative_samples == 8192
    assert fast.model_dump(exclude={"model"}) == bilm_tf.model_dump(exclude={"model"})
    assert set(RECIPES["fast"]) == set(RECIPES["bilm-tf"])
    result = runner.invoke(app, ["init-config", str(tmp_path / "x.cfg"), "--recipe", "huge"])
    assert result.exit_code == 1 and "choose one of default, bilm-tf, fast" in result.output
    assert not (tmp_path / "x.cfg").exists()


def test_threads_auto_is_two_where_two_cores_are_usable():
    from spacy_elmo.nn.threads import usable_cores

    settings = parse_settings(load_config(None, {"paths.train": "x.txt", "system.threads": "auto"}))
    assert settings.system.thread_count == min(2, usable_cores())
    with pytest.raises(ConfigError, match=r"system\.threads must be"):
        parse_settings(load_config(None, {"paths.train": "x.txt", "system.threads": "many"}))
