"""Training on your own data, the spaCy way: ``python -m spacy_elmo config`` writes a spaCy training
config for components on ELMo (as ``spacy init config`` does for spaCy's own), from ``.spacy``
files or, for text classification, JSONL as spaCy's text classification projects keep it;
``convert-textcat`` writes ``.spacy`` files from JSONL. End to end on small data made here, with
the README's two commands as a user runs them (subprocesses with deadlines).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example
from spacy.training.converters import conllu_to_docs
from thinc.api import Config
from typer.testing import CliRunner

from benchmarks.subprocesses import subprocess_env
from spacy_elmo.cli import app
from spacy_elmo.cli.config import components, training_config
from spacy_elmo.pretrain.config import flatten
from spacy_elmo.textcat_jsonl import read_docs

REPO = Path(__file__).resolve().parents[1]
EWT = REPO / "project" / "demo_data" / "ud-english-ewt"
runner = CliRunner()

# Two labels a sentence of which says which: easy for a classifier, made here.
POSITIVE = ["a wonderful film", "great acting and a fine story", "I loved every minute", "brilliant and moving"]
NEGATIVE = ["a dull film", "terrible acting and a thin story", "I hated every minute", "boring and far too long"]


def _labelled(n: int, offset: int = 0) -> List[dict]:
    records = []
    for i in range(n):
        good = (i + offset) % 2 == 0
        phrases = POSITIVE if good else NEGATIVE
        records.append({"text": f"{phrases[(i // 2) % len(phrases)]} , said reviewer {i + offset} .", "label": "POS" if good else "NEG"})
    return records


def _write_jsonl(path: Path, records: List[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def _run(argv: List[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """A command as a user runs it, in its own process group, ended whole at the deadline."""
    job = subprocess.Popen(
        argv, cwd=cwd, env=subprocess_env(threads=1), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    try:
        out, err = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.communicate()
        pytest.fail(f"{' '.join(argv[:6])} ... did not finish in {timeout} s")
    return subprocess.CompletedProcess(argv, job.returncode, out, err)


def _readme_commands() -> List[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("## Your own data\n")
    block = re.compile(r"```bash\n(.*?)```", re.DOTALL).search(text, start).group(1)
    return block.strip().splitlines()


def _as_run_here(command: str) -> List[str]:
    """A README command with this interpreter as ``python``. Its one environment setting,
    ``OMP_NUM_THREADS=1`` (one PyTorch op thread: the README's fast path), is what ``_run``'s
    environment sets."""
    words = command.split()
    if words[0] == "OMP_NUM_THREADS=1":
        words = words[1:]
    assert words[:2] == ["python", "-m"], command
    return [sys.executable, *words[1:]]


@pytest.mark.slow
def test_the_readmes_two_commands_train_a_text_classifier_on_labelled_jsonl(tmp_path):
    """A folder of labelled texts -> config -> spacy train (a short budget added, to be quick) ->
    a pipeline that classifies, and that spaCy's own evaluate scores on a test set converted
    with convert-textcat."""
    _write_jsonl(tmp_path / "my_data" / "train.jsonl", _labelled(40))
    _write_jsonl(tmp_path / "my_data" / "dev.jsonl", _labelled(12, offset=100))
    _write_jsonl(tmp_path / "my_data" / "test.jsonl", _labelled(12, offset=200))
    configure, train = _readme_commands()
    assert "--pipeline textcat" in configure and train.startswith("OMP_NUM_THREADS=1 python -m spacy train")
    written = _run(_as_run_here(configure), tmp_path)
    assert written.returncode == 0, written.stderr[-3000:]
    trained = _run(_as_run_here(train) + ["--training.max_steps", "20", "--training.eval_frequency", "10"], tmp_path)
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]

    model = tmp_path / "my_textcat" / "model-best"
    nlp = spacy.load(model)
    assert nlp.pipe_names == ["elmo", "textcat"]
    doc = nlp("I loved every minute , said a reviewer .")
    assert set(doc.cats) == {"POS", "NEG"} and sum(doc.cats.values()) == pytest.approx(1.0, abs=1e-5)

    converted = runner.invoke(app, ["convert-textcat", str(tmp_path / "my_data" / "test.jsonl"), str(tmp_path / "corpus")])
    assert converted.exit_code == 0, converted.output
    assert "corpus/test.spacy: 12 texts, labels: NEG 6, POS 6" in converted.output.replace(str(tmp_path) + "/", "")
    scored = _run([sys.executable, "-m", "spacy", "evaluate", str(model), "corpus/test.spacy", "--output", "test.json"], tmp_path)
    assert scored.returncode == 0, scored.stderr[-3000:]
    scores = json.loads((tmp_path / "test.json").read_text())
    assert scores["cats_score"] > 0.7, scores  # 20 updates separate these two labels


@pytest.mark.slow
def test_a_tagger_and_a_parser_from_spacy_files(tmp_path):
    """--pipeline tagger,parser: two listeners on one elmo pipe, trained by spacy train on
    .spacy files (UD English-EWT, the project's demo slice, via spaCy's own converter)."""
    for split in ("train", "dev"):
        docs = list(conllu_to_docs((EWT / f"{split}.conllu").read_text(encoding="utf-8"), n_sents=1))[:40]
        DocBin(docs=docs).to_disk(tmp_path / f"{split}.spacy")
    written = runner.invoke(app, [
        "config", str(tmp_path / "config.cfg"), "--pipeline", "tagger,parser",
        "--train", str(tmp_path / "train.spacy"), "--dev", str(tmp_path / "dev.spacy"),
    ])  # fmt: skip
    assert written.exit_code == 0, written.output
    config = Config().from_disk(tmp_path / "config.cfg", interpolate=False)
    assert config["nlp"]["pipeline"] == ["elmo", "tagger", "parser"]
    assert config["corpora"]["train"]["@readers"] == "spacy.Corpus.v1"
    trained = _run([sys.executable, "-m", "spacy", "train", "config.cfg", "--output", "out",
                    "--training.max_steps", "6", "--training.eval_frequency", "3"], tmp_path)  # fmt: skip
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    nlp = spacy.load(tmp_path / "out" / "model-last")
    doc = nlp("The bank raised its rates .")
    assert all(token.tag_ for token in doc) and doc.has_annotation("DEP")


def test_an_ner_config_trains_in_process():
    """The ner block on its listener: initialize and two updates on entities made here."""
    nlp = spacy.util.load_model_from_config(training_config(["ner"]), auto_fill=True)
    examples = []
    for text, entities in [("Alice lives in Paris .", [(0, 5, "PERSON"), (15, 20, "PLACE")]),
                           ("Bob moved to Berlin .", [(0, 3, "PERSON"), (13, 19, "PLACE")])]:  # fmt: skip
        examples.append(Example.from_dict(nlp.make_doc(text), {"entities": entities}))
    optimizer = nlp.initialize(lambda: examples)
    losses = {}
    for _ in range(2):
        nlp.update(examples, sgd=optimizer, losses=losses)
    assert losses["ner"] > 0 and set(nlp.get_pipe("ner").labels) == {"PERSON", "PLACE"}


# Project configs are what the templates reproduce: the settings each project config gives its
# components are those of the generated config (the cache size, sized there to each corpus, and
# the weights, the bundled model either way, aside).
PROJECT_ONLY = {"elmo.cache_size_mb", "elmo.model.weights"}


@pytest.mark.parametrize("task", ["tagger", "ner", "parser", "textcat"])
def test_the_generated_components_are_the_projects(task):
    project = Config().from_disk(REPO / "project" / "configs" / f"{task}_elmo.cfg").interpolate()
    generated = training_config([task]).interpolate()
    theirs = {k: v for k, v in flatten(project["components"]).items() if k not in PROJECT_ONLY}
    ours = flatten(generated["components"])
    assert {k: (v, ours.get(k)) for k, v in theirs.items() if ours.get(k) != v} == {}
    for key in ("frozen_components", "annotating_components"):
        assert generated["training"][key] == project["training"][key] == ["elmo"]


def test_every_component_of_the_templates_can_be_generated():
    assert components() == ["tagger", "ner", "parser", "textcat", "textcat_multilabel"]
    config = training_config(components())
    assert config["nlp"]["pipeline"] == ["elmo", *components()]
    assert config["components"]["textcat_multilabel"]["model"]["exclusive_classes"] is False
    for name in components():
        assert config["components"][name]["model"]["tok2vec"]["embed"]["@architectures"] == "spacy_elmo.ElmoListener.v1"


@pytest.mark.parametrize(
    "args, says",
    [
        (["--pipeline", "tok2vec,tagger"], "--pipeline: tok2vec unknown; the components that train on ELMo here: tagger, ner"),
        (["--pipeline", "tagger,tagger"], "--pipeline: tagger given twice"),
        (["--pipeline", ","], "no components: give --pipeline"),
        (["--pipeline", "tagger", "--train", "{data}/train.jsonl"], "has no textcat; for a tagger, ner or parser convert"),
        (["--pipeline", "textcat", "--train", "{data}/missing.jsonl"], "--train {data}/missing.jsonl: no such file"),
        (["--pipeline", "textcat", "--weights", "no-such-model"], "'no-such-model' is neither a model directory nor a downloaded model"),
    ],
    ids=["unknown", "twice", "empty", "jsonl-for-a-tagger", "missing-data", "unknown-weights"],
)
def test_config_refuses_what_it_cannot_write(tmp_path, args, says):
    _write_jsonl(tmp_path / "train.jsonl", _labelled(4))
    args = [arg.format(data=tmp_path) for arg in args]
    result = runner.invoke(app, ["config", str(tmp_path / "config.cfg"), *args])
    assert result.exit_code == 1, result.output
    assert says.format(data=tmp_path) in " ".join(result.output.split()), result.output
    assert not (tmp_path / "config.cfg").exists()


def test_config_to_standard_output_says_how_to_train():
    result = runner.invoke(app, ["config", "-", "--pipeline", "textcat_multilabel"])
    assert result.exit_code == 0, result.output
    assert (
        "OMP_NUM_THREADS=1 python -m spacy train - --output MODEL_DIR --paths.train TRAIN --paths.dev DEV "
        "--training.max_steps 2000" in result.output
    )
    assert "the config's own is 20,000" in result.output
    config = Config().from_str(result.output.split("\n", 6)[-1], interpolate=False)
    assert config["nlp"]["pipeline"] == ["elmo", "textcat_multilabel"]


@pytest.mark.parametrize(
    "line, says",
    [
        ("not json", "line 2: not JSON"),
        ('["a list"]', 'line 2: no text; each line must be a JSON object with a non-empty "text" string'),
        ('{"label": "POS"}', "line 2: no text; each line must be a JSON object"),
        ('{"text": "  ", "label": "POS"}', "line 2: no text; each line must be a JSON object"),
        ('{"text": "x"}', 'line 2: neither "label" nor "cats"'),
        ('{"text": "x", "label": "POS", "cats": {"POS": 1.0}}', 'line 2: both "label" and "cats"'),
        ('{"text": "x", "label": 3}', 'line 2: "label" must be a non-empty string'),
        ('{"text": "x", "cats": {"POS": 1.5}}', 'line 2: "cats" must map labels to scores from 0 to 1'),
        ('{"text": "x", "cats": {"POS": true}}', 'line 2: "cats" must map labels to scores from 0 to 1'),
        ('{"text": "x", "cats": {}}', 'line 2: "cats" must be an object of label -> score'),
    ],
)
def test_convert_textcat_names_the_file_and_line_of_a_bad_record(tmp_path, line, says):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(_labelled(1)[0]) + "\n" + line + "\n", encoding="utf-8")
    result = runner.invoke(app, ["convert-textcat", str(path), str(tmp_path / "out")])
    assert result.exit_code == 1 and f"error: {path}, {says}" in result.output, result.output
    assert not (tmp_path / "out").exists()


def test_convert_textcat_takes_directories_and_keeps_every_label(tmp_path):
    _write_jsonl(tmp_path / "data" / "train.jsonl", _labelled(6))
    _write_jsonl(tmp_path / "data" / "more" / "dev.jsonl", [{"text": "Both , really .", "cats": {"POS": 1.0, "NEG": 1.0}}])
    result = runner.invoke(app, ["convert-textcat", str(tmp_path / "data"), str(tmp_path / "out"), "--lang", "de"])
    assert result.exit_code == 0, result.output
    vocab = spacy.blank("de").vocab
    train = list(DocBin().from_disk(tmp_path / "out" / "train.spacy").get_docs(vocab))
    dev = list(DocBin().from_disk(tmp_path / "out" / "dev.spacy").get_docs(vocab))
    assert [doc.cats for doc in train] == [{record["label"]: 1.0} for record in _labelled(6)]
    assert [doc.text for doc in train] == [record["text"] for record in _labelled(6)]
    assert dev[0].cats == {"POS": 1.0, "NEG": 1.0}


@pytest.mark.parametrize(
    "files, says",
    [
        ({"empty.jsonl": ""}, "empty.jsonl: no labelled texts"),
        ({"a/train.jsonl": "x", "b/train.jsonl": "x"}, "several inputs are named train.jsonl"),
        ({"data.txt": "x"}, "data.txt: expected a .jsonl file of labelled texts"),
    ],
    ids=["empty", "same-name", "not-jsonl"],
)
def test_convert_textcat_refuses_inputs_it_cannot_convert(tmp_path, files, says):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if text != "x" else json.dumps(_labelled(1)[0]) + "\n", encoding="utf-8")
    inputs = [str(tmp_path / name) for name in files]
    result = runner.invoke(app, ["convert-textcat", *inputs, str(tmp_path / "out")])
    assert result.exit_code == 1 and says in result.output, result.output
    assert not (tmp_path / "out").exists()


def test_the_reader_gives_spacy_examples_with_the_pipelines_tokens(tmp_path):
    from spacy.util import registry

    _write_jsonl(tmp_path / "train.jsonl", _labelled(3))
    nlp = spacy.blank("en")
    corpus = registry.readers.get("spacy_elmo.TextCatCorpus.v1")(tmp_path / "train.jsonl", limit=2)
    examples = list(corpus(nlp))
    assert len(examples) == 2
    assert [eg.reference.cats for eg in examples] == [{"POS": 1.0}, {"NEG": 1.0}]
    assert [t.text for t in examples[0].predicted] == [t.text for t in nlp.make_doc(_labelled(1)[0]["text"])]
    assert list(read_docs(tmp_path, nlp.make_doc))[2].cats == {"POS": 1.0}
