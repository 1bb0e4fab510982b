"""The spaCy project (project/): its compare script, the configs' fairness, and the `demo` workflow
end to end (pretrain a tiny biLM, package it, train and evaluate ELMo and baseline taggers and
NERs, compare), plus installing the packaged pipeline with pip, offline."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import spacy
import srsly
from thinc.api import Config
from typer.testing import CliRunner

from conftest import checkout_pythonpath, project_script

REPO = Path(__file__).resolve().parents[1]
PROJECT = REPO / "project"


compare = project_script("compare")
SystemMetrics, SystemRuns, read_system = compare.SystemMetrics, compare.SystemRuns, compare.read_system
comparison_table, seeds_table = compare.comparison_table, compare.seeds_table
comparison_figure, plot_comparison = compare.comparison_figure, compare.plot_comparison
OUTPUT_DIRS = ("assets", "corpus", "training", "metrics", "packages", "project.lock")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

ELMO = SystemMetrics(
    "ELMo",
    scores={
        "tagger": {"tag_acc": 0.9512, "speed": 4100.4},
        "ner": {"ents_f": 0.4012, "ents_p": 0.5, "ents_r": 0.335, "speed": 3900.0},
    },
    train_seconds={"tagger": 83.2, "ner": 40.0},
)
BASELINE = SystemMetrics(
    "spaCy tok2vec",
    scores={
        "tagger": {"tag_acc": 0.9362, "speed": 12000.0},
        "ner": {"ents_f": 0.3, "ents_p": 0.4, "ents_r": 0.24},
    },
    train_seconds={"tagger": 30.0},
)


def subprocess_env():
    # The subprocesses import this checkout's code; one torch thread each, since the tiny demo
    # models only wait for each other on a busy 2-core machine with more threads.
    return {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1"}


def copy_project(destination: Path) -> Path:
    shutil.copytree(PROJECT, destination, ignore=shutil.ignore_patterns(*OUTPUT_DIRS))
    return destination


# ---------------------------------------------------------------------------- compare


def test_comparison_table_rows_and_differences():
    table = comparison_table([ELMO, BASELINE], title="Test sets")
    lines = table.splitlines()
    assert lines[0] == "## Test sets"
    header = next(line for line in lines if line.startswith("| system"))
    assert "tagger accuracy" in header and "NER F1" in header and "tagger training" in header
    elmo_row = next(line for line in lines if line.startswith("| ELMo |"))
    expected = "| ELMo | 95.12 | 40.12 | 50.00 | 33.50 | 1 min 23 s | 40 s | 4,100 | 3,900 |"
    assert elmo_row == expected
    baseline_row = next(line for line in lines if line.startswith("| spaCy tok2vec |"))
    # No NER timing and no NER speed for the baseline: empty cells, not zeros.
    assert baseline_row.endswith("| 30 s | - | 12,000 | - |")
    assert "- ELMo vs spaCy tok2vec: tagger accuracy +1.50, NER F1 +10.12 points" in lines


def test_comparison_of_a_system_with_one_task_only():
    tagger_only = SystemMetrics("tagger only", scores={"tagger": {"tag_acc": 0.5}})
    table = comparison_table([tagger_only, BASELINE])
    assert "| tagger only | 50.00 | - | - | - | - | - | - | - |" in table
    assert "tagger only vs spaCy tok2vec: tagger accuracy -43.62 points" in table


def test_read_system_from_spacy_evaluate_output(tmp_path):
    srsly.write_json(tmp_path / "tagger.json", {"token_acc": 1.0, "tag_acc": 0.93, "speed": 100})
    srsly.write_json(tmp_path / "tagger_train.json", {"seconds": 12.5, "command": ["-m", "spacy"]})
    system = read_system("mine", tmp_path)
    assert system.score("tagger", "tag_acc") == 0.93
    assert system.score("ner", "ents_f") is None
    assert system.train_seconds == {"tagger": 12.5}
    with pytest.raises(ValueError, match="does not exist"):
        read_system("gone", tmp_path / "gone")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds none of tagger.json, ner.json, textcat.json, parser.json"):
        read_system("empty", tmp_path / "empty")


def seed_runs(name, tag_accs, ents_fs):
    return SystemRuns(
        name,
        [
            SystemMetrics(name, scores={"tagger": {"tag_acc": a}, "ner": {"ents_f": f}}, train_seconds={"tagger": 60.0 * (i + 1)})
            for i, (a, f) in enumerate(zip(tag_accs, ents_fs))
        ],
    )


def test_seeds_table_means_spreads_and_paired_gaps():
    elmo = seed_runs("ELMo", [0.94, 0.93, 0.95], [0.20, 0.22, 0.18])
    base = seed_runs("tok2vec", [0.93, 0.92, 0.925], [0.16, 0.23, 0.15])
    table = seeds_table([elmo, base], title="Three seeds")
    rows = {line.split(" | ")[0]: line for line in table.splitlines() if line.startswith("| ")}
    # mean 94.00, sample sd of (94, 93, 95) = 1.00; NER mean 20.00, sd 2.00; mean time 2 min.
    assert rows["| ELMo"] == "| ELMo | 3 | 94.00, 93.00, 95.00 | 94.00 (1.00) | 20.00, 22.00, 18.00 | 20.00 (2.00) | 2 min 00 s | - |"
    lines = table.splitlines()
    # Tagger: tok2vec mean 92.50 (sd 0.50); +1.50 on average, per seed +1.00, +1.00, +2.50: more
    # than ELMo's sd of 1.00, less than its range of 2.00.
    assert (
        "- ELMo vs tok2vec, tagger accuracy: +1.50 points on average (per seed +1.00, +1.00, "
        "+2.50; ahead at 3 of 3); more than the larger standard deviation (1.00), less than the "
        "larger range (2.00)" in lines
    )
    # NER: tok2vec mean 18.00 (sd 4.36, range 8.00); ELMo behind at seed 2.
    ner = next(line for line in lines if line.startswith("- ELMo vs tok2vec, NER F1"))
    assert "+2.00 points on average" in ner and "ahead at 2 of 3" in ner and "(4.36)" in ner


def test_seeds_table_of_textcat_and_parser_with_the_time_after_the_first_epoch(tmp_path):
    """The sst5 and parser workflows' systems: only their columns, and the training time per
    100 steps after the first epoch (timed.py's evaluations) with its ratio to the reference."""

    def timing(seconds_per_step):
        evaluations = [{"epoch": 0, "step": 0, "seconds": 10.0}, {"epoch": 0, "step": 500, "seconds": 400.0}]
        evaluations += [
            {"epoch": 1, "step": step, "seconds": 400.0 + seconds_per_step * (step - 500)}
            for step in (1000, 1500)
        ]
        return {"seconds": evaluations[-1]["seconds"], "evaluations": evaluations}

    for name, accuracy, las, per_step in (("elmo", 0.40, 0.80, 0.12), ("base", 0.36, 0.78, 0.10)):
        directory = tmp_path / name
        directory.mkdir()
        srsly.write_json(directory / "textcat.json", {"cats_micro_f": accuracy, "cats_macro_f": accuracy - 0.05})
        srsly.write_json(directory / "textcat_train.json", timing(per_step))
        srsly.write_json(directory / "parser.json", {"dep_las": las, "dep_uas": las + 0.05})
    elmo, base = read_system("ELMo", tmp_path / "elmo"), read_system("tok2vec", tmp_path / "base")
    assert elmo.later_epochs_seconds == {"textcat": pytest.approx(12.0)}  # (1500 - 1000) steps
    table = seeds_table([SystemRuns("ELMo", [elmo, elmo]), SystemRuns("tok2vec", [base, base])])
    header = table.splitlines()[0]
    assert "tagger" not in header and "NER" not in header
    assert "textcat accuracy, mean (sd)" in header and "parser LAS, mean (sd)" in header
    assert "textcat s / 100 steps after epoch 1 (mean)" in header
    assert (
        "| ELMo | 2 | 40.00, 40.00 | 40.00 (0.00) | 35.00, 35.00 | 35.00 (0.00) | 80.00, 80.00 | 80.00 (0.00) "
        "| 85.00, 85.00 | 85.00 (0.00) |" in table
    )
    assert "- ELMo vs tok2vec, textcat accuracy: +4.00 points on average" in table
    assert "- ELMo vs tok2vec, parser LAS: +2.00 points on average" in table
    assert "- ELMo vs tok2vec, textcat training time after the first epoch: 1.20x (per seed 1.20x, 1.20x)" in table
    single = comparison_table([elmo, base])
    assert "| ELMo | 40.00 | 35.00 | 80.00 | 85.00 |" in single


def test_plot_is_a_png(tmp_path, matplotlib):
    systems = [SystemRuns(s.name, [s]) for s in (ELMO, BASELINE)]
    png = plot_comparison(systems, tmp_path / "plots" / "chart.png", title="Test sets")
    assert png.read_bytes()[:8] == PNG_MAGIC
    seeds = [seed_runs("ELMo", [0.94, 0.93], [0.2, 0.22]), seed_runs("base", [0.93, 0.92], [0.1, 0.12])]
    png = plot_comparison(seeds, tmp_path / "seeds.png")
    assert png.read_bytes()[:8] == PNG_MAGIC


def test_every_axis_of_the_chart_starts_at_zero(matplotlib):
    """An axis fitted to the values makes a 1-point gap at 94% look like a doubling; from 0, the
    bars and points are to scale (the means are written beside the points)."""
    import matplotlib.pyplot as plt

    seeds = [seed_runs("ELMo", [0.94, 0.93], [0.2, 0.22]), seed_runs("base", [0.93, 0.92], [0.1, 0.12])]
    fig = comparison_figure(seeds, title="Test sets")
    try:
        assert len(fig.axes) >= 3
        for ax in fig.axes:
            bottom, top = ax.get_ylim()
            heights = [y for line in ax.get_lines() for y in line.get_ydata()] + [b.get_height() for b in ax.patches]
            assert bottom == 0 and top >= max(heights), (ax.get_title() or ax.get_ylabel(), bottom, top)
    finally:
        plt.close(fig)


def test_compare_command(tmp_path):
    for name, system in (("elmo", ELMO), ("baseline", BASELINE)):
        (tmp_path / name).mkdir()
        for task, scores in system.scores.items():
            srsly.write_json(tmp_path / name / f"{task}.json", scores)
    result = CliRunner().invoke(
        compare.app,
        [f"ELMo (d=64)={tmp_path / 'elmo'}", f"spaCy tok2vec={tmp_path / 'baseline'}",
         "--output", str(tmp_path / "comparison.md")],
    )
    assert result.exit_code == 0, result.output
    table = (tmp_path / "comparison.md").read_text()
    assert "| ELMo (d=64) | 95.12 |" in table and "| spaCy tok2vec | 93.62 |" in table
    bad = CliRunner().invoke(compare.app, [str(tmp_path / "elmo"), "-o", str(tmp_path / "x.md")])
    assert bad.exit_code != 0 and "LABEL=METRICS_DIR" in bad.output
    for systems, message in (
        ([f"A={tmp_path / 'elmo'}", f"A={tmp_path / 'baseline'}"], "the label 'A' is given twice"),
        ([f"A={tmp_path / 'gone'}"], f"compare: the metrics directory of 'A', {tmp_path / 'gone'}, does not exist"),
    ):
        bad = CliRunner().invoke(compare.app, [*systems, "-o", str(tmp_path / "x.md")])
        assert (bad.exit_code, bad.exception.__class__) == (1, SystemExit)
        assert f"error: {message}" in bad.output and not (tmp_path / "x.md").exists()
    # One directory per seed: the seeds table.
    seeds = CliRunner().invoke(
        compare.app,
        [f"ELMo={tmp_path / 'elmo'},{tmp_path / 'elmo'}",
         f"spaCy tok2vec={tmp_path / 'baseline'},{tmp_path / 'baseline'}",
         "--output", str(tmp_path / "seeds.md")],
    )
    assert seeds.exit_code == 0, seeds.output
    assert "| ELMo | 2 | 95.12, 95.12 | 95.12 (0.00) |" in (tmp_path / "seeds.md").read_text()


# ---------------------------------------------------------------------------- project files


@pytest.mark.parametrize("task", ["tagger", "ner", "textcat", "parser"])
def test_elmo_and_baseline_configs_differ_only_in_the_embedding(task):
    elmo = Config().from_disk(PROJECT / "configs" / f"{task}_elmo.cfg", interpolate=False)
    baseline = Config().from_disk(PROJECT / "configs" / f"{task}_baseline.cfg", interpolate=False)
    assert elmo["nlp"]["pipeline"] == ["elmo", task] and baseline["nlp"]["pipeline"] == [task]
    assert elmo["components"]["elmo"]["frozen"] is True
    for key in ("frozen_components", "annotating_components"):
        assert elmo["training"].pop(key) == ["elmo"] and baseline["training"].pop(key) == []
    assert elmo["training"] == baseline["training"]
    assert elmo["corpora"] == baseline["corpora"] and elmo["system"] == baseline["system"]
    elmo_tok2vec = elmo["components"][task]["model"].pop("tok2vec")
    baseline_tok2vec = baseline["components"][task]["model"].pop("tok2vec")
    assert elmo["components"][task] == baseline["components"][task]
    assert elmo_tok2vec["encode"] == baseline_tok2vec["encode"]
    assert elmo_tok2vec["embed"]["@architectures"] == "spacy_elmo.ElmoListener.v1"
    # The baseline's hash embeddings sit beside ELMo in the listener.
    assert elmo_tok2vec["embed"]["token_embed"] == baseline_tok2vec["embed"]


def test_workflows_give_elmo_and_baseline_the_same_budget():
    project = srsly.read_yaml(PROJECT / "project.yml")
    commands = {c["name"]: c for c in project["commands"]}
    for name, steps in project["workflows"].items():
        assert all(step in commands for step in steps), name
    keys = r"system\.seed|training\.max_steps|training\.max_epochs|training\.eval_frequency"
    options = re.compile(rf"--({keys}) (\S+)")

    def budgets(command_name):
        return [dict(options.findall(line)) for line in commands[command_name]["script"]]

    for elmo, baseline in [
        ("train-bundled", "train-baseline"),
        ("train-pretrained", "train-baseline"),
        ("demo-train-elmo", "demo-train-baseline"),
    ]:
        assert budgets(elmo) == budgets(baseline) and len(budgets(elmo)[0]) == 4, (elmo, baseline)
    for both in ("train-sst5", "train-parser"):  # ELMo, then the baseline, in one command
        elmo, baseline = budgets(both)
        assert elmo == baseline and len(elmo) == 4, both


def test_adapted_biLMs_train_at_the_budgets_of_the_seeds_runs_they_are_compared_with():
    """`train-adapted`'s components against `train-seeds`' bundled ones: the same budget options,
    task by task, so that the comparison is at equal training budgets."""
    commands = {c["name"]: c for c in srsly.read_yaml(PROJECT / "project.yml")["commands"]}
    budget = re.compile(r"--(max-steps|eval-frequency) (\S+)")

    def budgets(name, system):
        found = {}
        for line in commands[name]["script"]:
            if f"seeds.py {system} " in line:
                task = re.search(r"--tasks (\S+)", line)
                for each in (task.group(1) if task else "tagger,ner").split(","):
                    found[each] = budget.findall(line)
        return found

    adapted, seeds = budgets("train-adapted", "bundled"), budgets("train-seeds", "bundled")
    assert set(adapted) == {"ner", "tagger", "textcat"}
    assert all(adapted[task] == seeds[task] for task in adapted), (adapted, seeds)


def test_every_asset_names_its_public_source_and_checksum():
    """What the project downloads is pinned: a URL and an md5 per asset. Whether the checksums are
    those of the real files is checked where the files are: ``prepare-data`` refuses a copy or a
    file in place whose md5 differs (test_prepare_data_checks_an_asset_already_in_place)."""
    assets = srsly.read_yaml(PROJECT / "project.yml")["assets"]
    local = [a for a in assets if not a.get("extra")]
    # WikiText-2 (2), UD English-EWT (3), WNUT17 (3), SST-5 (3)
    assert len(local) == 11
    for asset in local:
        assert asset["url"].startswith("https://") and asset.get("description"), asset["dest"]
        assert re.fullmatch(r"[0-9a-f]{32}", asset.get("checksum", "")), asset["dest"]


def test_demo_data_is_small_and_attributed():
    files = [p for p in (PROJECT / "demo_data").rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 1_000_000
    notes = (PROJECT / "demo_data" / "README.md").read_text()
    assert all(licence in notes for licence in ("CC BY-SA 4.0", "CC BY 4.0", "CC BY-SA 3.0"))


def test_conll_2003_newswire_converts_one_doc_per_sentence(tmp_path):
    """CoNLL-2003's 4-column IOB1 with `-DOCSTART-` lines, as the NER script takes it: every
    sentence one doc, no one-token documents from the markers, IOB1 entities as written."""
    rows = [
        "-DOCSTART- -X- -X- O", "",
        "EU NNP B-NP I-ORG", "rejects VBZ B-VP O", "German JJ B-NP I-MISC", "call NN I-NP O",
        ". . O O", "",
        "Peter NNP B-NP I-PER", "Blackburn NNP I-NP I-PER", "", "-DOCSTART- -X- O O", "",
        "BRUSSELS NNP B-NP I-LOC", "1996-08-22 CD I-NP O", "",
        "Lee NNP B-NP I-PER", "Smith NNP I-NP B-PER", "met VBD B-VP O", "",
    ]  # fmt: skip
    (tmp_path / "train.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    run = _convert("conll_ner_to_spacy.py", tmp_path / "out", tmp_path / "train.txt")
    assert "4 docs, 12 tokens, 6 entities, 2 -DOCSTART- lines dropped" in run.stdout
    from spacy.tokens import DocBin

    docs = list(DocBin().from_disk(tmp_path / "out" / "train.spacy").get_docs(spacy.blank("en").vocab))
    assert [[(e.text, e.label_) for e in doc.ents] for doc in docs] == [
        [("EU", "ORG"), ("German", "MISC")],
        [("Peter Blackburn", "PER")],
        [("BRUSSELS", "LOC")],
        [("Lee", "PER"), ("Smith", "PER")],  # IOB1: B- splits two adjacent entities
    ]


def _convert(script: str, out: Path, source: Path) -> subprocess.CompletedProcess:
    """Run one of the project's converter scripts; it must succeed."""
    run = subprocess.run(
        [sys.executable, str(PROJECT / "scripts" / script), str(out), str(source)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return run


def test_sst5_converts_labels_to_exclusive_categories(tmp_path):
    """SST-5 lines (label 0..4, a space, the tokenized text): one doc each, the treebank's tokens
    as words, the label as the one category at 1.0 of five named ones."""
    lines = ["4 a stirring , funny re-imagining", "0 it 's a mess .", "2 -lrb- a film -rrb-"]
    (tmp_path / "stsa.fine.dev").write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = _convert("sst5_to_spacy.py", tmp_path / "out", tmp_path / "stsa.fine.dev")
    assert "3 docs, 14 tokens (very negative 1, negative 0, neutral 1, positive 0, very positive 1)" in run.stdout
    from spacy.tokens import DocBin

    docs = list(DocBin().from_disk(tmp_path / "out" / "stsa.fine.dev.spacy").get_docs(spacy.blank("en").vocab))
    assert [doc.text for doc in docs] == [line[2:] for line in lines]
    assert [len(doc) for doc in docs] == [5, 5, 4]
    names = ["very negative", "negative", "neutral", "positive", "very positive"]
    assert all(sorted(doc.cats) == sorted(names) and sum(doc.cats.values()) == 1.0 for doc in docs)
    assert [max(doc.cats, key=doc.cats.get) for doc in docs] == ["very positive", "very negative", "neutral"]


@pytest.mark.parametrize("bad", ["5 too positive", "positive text", "3", "-1 x"])
def test_sst5_line_without_a_label_names_the_file_and_line(tmp_path, bad):
    path = tmp_path / "stsa.fine.train"
    path.write_text(f"1 fine line\n{bad}\n", encoding="utf-8")
    run = subprocess.run(
        [sys.executable, str(PROJECT / "scripts" / "sst5_to_spacy.py"), str(tmp_path / "out"), str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode != 0 and not (tmp_path / "out" / "stsa.fine.train.spacy").exists()
    assert f"{path}, line 2: expected a label 0..4, a space and the sentence" in run.stderr


def test_prepare_data_without_a_mirror_names_what_is_missing(tmp_path):
    project = copy_project(tmp_path / "project")
    result = subprocess.run(
        [sys.executable, "scripts/prepare_data.py", str(tmp_path / "no-mirror")],
        cwd=project, capture_output=True, text=True, env=subprocess_env(), timeout=120,
    )
    assert result.returncode != 0
    assert "assets/wnut17/wnut17train.conll" in result.stderr
    assert "spacy project assets" in result.stderr


def test_prepare_data_checks_an_asset_already_in_place(tmp_path):
    project = copy_project(tmp_path / "project")
    asset = project / "assets" / "wikitext-2" / "valid.txt"
    asset.parent.mkdir(parents=True)
    asset.write_text("not the WikiText-2 validation split\n")
    result = subprocess.run(
        [sys.executable, "scripts/prepare_data.py", str(tmp_path / "no-mirror")],
        cwd=project, capture_output=True, text=True, env=subprocess_env(), timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "assets/wikitext-2/valid.txt is in place, but its md5 differs" in result.stderr


def _workflow_assets() -> dict:
    """Per workflow: the assets its commands read (deps under assets/) and those it prepares."""
    project = srsly.read_yaml(PROJECT / "project.yml")
    commands = {c["name"]: c for c in project["commands"]}
    found = {}
    for name, steps in project["workflows"].items():
        read = {d for step in steps for d in commands[step].get("deps", []) if d.startswith("assets/")}
        prepared = {o for step in steps if step.startswith("prepare-") for o in commands[step]["outputs"]}
        found[name] = (read, prepared)
    return found


@pytest.mark.parametrize("workflow", list(_workflow_assets()))
def test_each_workflow_prepares_its_own_assets_and_no_others(workflow):
    read, prepared = _workflow_assets()[workflow]
    assert read == prepared


def test_the_sst5_workflow_asks_for_sst5_only(tmp_path):
    """Without the corpora, `spacy project run sst5` names what it needs: SST-5, not WikiText-2,
    EWT or WNUT17 (it asked for all 11 assets before)."""
    project = copy_project(tmp_path / "project")
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "project", "run", "sst5", str(project), "--vars.shared_data", str(tmp_path / "none")],
        capture_output=True, text=True, env=subprocess_env(), timeout=120,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert output.count("(not in ") == 3 and "assets/sst5/stsa.fine.train" in output, output[-3000:]
    assert not any(corpus in output for corpus in ("wikitext-2/", "ud-english-ewt/", "wnut17/")), output[-3000:]


def test_prepare_data_refuses_an_unknown_corpus(tmp_path):
    project = copy_project(tmp_path / "project")
    result = subprocess.run(
        [sys.executable, "scripts/prepare_data.py", str(tmp_path / "none"), "--only", "sst5,imdb"],
        cwd=project, capture_output=True, text=True, env=subprocess_env(), timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "--only imdb: not a corpus of project.yml; its corpora: sst5, ud-english-ewt, wikitext-2, wnut17" in result.stderr


@pytest.mark.slow
def test_the_own_workflow_trains_on_your_files_alone(tmp_path):
    """`spacy project run own` with nothing but a user's JSONL files (absolute paths): corpus,
    config, training (a short budget), evaluation."""
    project = copy_project(tmp_path / "project")
    data = tmp_path / "my_data"
    data.mkdir()
    for split, offset, n in (("train", 0, 30), ("dev", 100, 10)):
        lines = [
            {"text": f"{'a wonderful film' if i % 2 else 'a dull film'} , said reviewer {offset + i} .",
             "label": "POS" if i % 2 else "NEG"}
            for i in range(n)
        ]  # fmt: skip
        (data / f"{split}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "project", "run", "own", str(project),
         "--vars.own_train", str(data / "train.jsonl"), "--vars.own_dev", str(data / "dev.jsonl"),
         "--vars.own_max_steps", "6", "--vars.own_eval_frequency", "3"],
        capture_output=True, text=True, env=subprocess_env(), timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    scores = srsly.read_json(project / "metrics" / "own" / "scores.json")
    assert "cats_score" in scores and set(scores["cats_f_per_type"]) == {"POS", "NEG"}
    assert not (project / "assets").exists() or not any((project / "assets").iterdir())


def test_the_own_workflow_says_which_files_to_give(tmp_path):
    project = copy_project(tmp_path / "project")
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "project", "run", "own-corpus", str(project)],
        capture_output=True, text=True, env=subprocess_env(), timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "--vars.own_train /path/to/train.jsonl --vars.own_dev /path/to/dev.jsonl" in result.stderr, result.stderr


# ---------------------------------------------------------------------------- demo workflow


def majority_upos_rate(conllu: Path) -> float:
    tags = Counter(
        line.split("\t")[3]
        for line in conllu.read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#") and line.split("\t")[0].isdigit()
    )
    return max(tags.values()) / sum(tags.values())


@pytest.fixture(scope="module")
def demo_project(tmp_path_factory):
    """A copy of project/ after `python -m spacy project run demo` (2 to 4 minutes on 2 cores)."""
    project = copy_project(tmp_path_factory.mktemp("demo") / "project")
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "project", "run", "demo", str(project)],
        capture_output=True, text=True, env=subprocess_env(), timeout=900,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    return project


@pytest.mark.slow
def test_demo_packages_a_loadable_elmo_pipeline(demo_project):
    package = demo_project / "packages" / "demo" / "en_elmo_demo-0.0.0"
    assert (package / "dist" / "en_elmo_demo-0.0.0.tar.gz").is_file()
    nlp = spacy.load(package / "en_elmo_demo" / "en_elmo_demo-0.0.0")
    assert nlp.pipe_names == ["elmo"]
    doc = nlp("The bank raised its rates .")
    assert doc._.elmo.shape == (6, 64)  # the demo biLM: projection_dim 32, two directions


@pytest.mark.slow
def test_demo_metrics_and_comparison(demo_project, matplotlib):
    metrics = demo_project / "metrics" / "demo"
    floor = majority_upos_rate(demo_project / "demo_data" / "ud-english-ewt" / "test.conllu")
    for system in ("elmo", "baseline"):
        tagger = srsly.read_json(metrics / system / "tagger.json")
        ner = srsly.read_json(metrics / system / "ner.json")
        assert tagger["tag_acc"] > floor + 0.2, (system, tagger["tag_acc"], floor)
        assert 0.0 <= ner["ents_f"] <= 1.0 and "ents_per_type" in ner
        for task in ("tagger", "ner"):
            assert srsly.read_json(metrics / system / f"{task}_train.json")["seconds"] > 0
    table = (metrics / "comparison.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert rows[2].startswith("| ELMo (demo biLM) | ") and rows[3].startswith("| spaCy tok2vec | ")
    elmo_accuracy = srsly.read_json(metrics / "elmo" / "tagger.json")["tag_acc"]
    assert f"| {100 * elmo_accuracy:.2f} |" in rows[2]
    assert (metrics / "comparison.png").read_bytes()[:8] == PNG_MAGIC
    import matplotlib.image

    assert matplotlib.image.imread(metrics / "comparison.png").shape[:2] == (400, 1200)


@pytest.mark.slow
def test_demo_package_installs_offline_with_pip(demo_project, tmp_path):
    """pip installs the packaged sdist without a network (no index, no build isolation: the
    build uses this environment's setuptools) and spacy.load finds it by name."""
    setuptools = pytest.importorskip("setuptools")
    if tuple(int(p) for p in setuptools.__version__.split(".")[:2]) < (70, 1):
        pytest.importorskip("wheel", reason="an offline build needs setuptools>=70.1 or wheel")
    package = demo_project / "packages" / "demo" / "en_elmo_demo-0.0.0"
    sdist = package / "dist" / "en_elmo_demo-0.0.0.tar.gz"
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(sdist)],
        capture_output=True, text=True, env=subprocess_env(), timeout=300,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    env = subprocess_env()
    env["PYTHONPATH"] = os.pathsep.join([str(target), env["PYTHONPATH"]])
    check = subprocess.run(
        [sys.executable, "-c",
         "import json, spacy; nlp = spacy.load('en_elmo_demo'); doc = nlp('A river bank');"
         "print(json.dumps([nlp.pipe_names, list(doc._.elmo.shape), nlp.meta['requirements']]))"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert check.returncode == 0, check.stderr[-3000:]
    pipe_names, shape, requirements = json.loads(check.stdout.strip().splitlines()[-1])
    assert pipe_names == ["elmo"] and shape == [3, 64]
    assert any(r.startswith("spacy-elmo") for r in requirements)


def test_seeds_script_compares_every_seed(tmp_path, matplotlib):
    """project/scripts/seeds.py compare: expands vars.seeds into one directory per seed."""
    for system, tag_accs in (("bundled", (0.94, 0.95)), ("baseline", (0.93, 0.92))):
        for seed, acc in zip((0, 1), tag_accs):
            run_dir = tmp_path / "metrics/seeds" / system / f"s{seed}"
            run_dir.mkdir(parents=True)
            srsly.write_json(run_dir / "tagger.json", {"tag_acc": acc})
    run = subprocess.run(
        [sys.executable, str(PROJECT / "scripts" / "seeds.py"), "compare", "0,1", "--label", "ELMo"],
        cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stderr
    table = (tmp_path / "metrics" / "comparison_seeds.md").read_text()
    assert "| ELMo | 2 | 94.00, 95.00 | 94.50 (0.71) |" in table
    assert "| spaCy tok2vec | 2 | 93.00, 92.00 | 92.50 (0.71) |" in table
    assert (tmp_path / "metrics" / "comparison_seeds.png").read_bytes()[:8] == PNG_MAGIC
    bad = subprocess.run(
        [sys.executable, str(PROJECT / "scripts" / "seeds.py"), "bundled", "0,x"],
        cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True,
    )
    assert bad.returncode != 0 and "comma-separated integers" in bad.stderr


def test_compare_without_matplotlib_writes_the_table_and_says_how_to_get_the_chart(tmp_path, monkeypatch):
    """The project's demo-compare on an install without the 'plot' extra: one clear line, not a
    ModuleNotFoundError traceback (sys.modules[name] = None makes the import fail, as if absent)."""
    for name, system in (("elmo", ELMO), ("baseline", BASELINE)):
        (tmp_path / name).mkdir()
        for task, scores in system.scores.items():
            srsly.write_json(tmp_path / name / f"{task}.json", scores)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = CliRunner().invoke(
        compare.app,
        [f"ELMo={tmp_path / 'elmo'}", f"tok2vec={tmp_path / 'baseline'}",
         "--output", str(tmp_path / "comparison.md"), "--plot", str(tmp_path / "chart.png")],
    )
    assert result.exit_code == 1
    assert "compare --plot needs matplotlib" in result.output and "pip install 'spacy-elmo[plot]'" in result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, ImportError)
    assert (tmp_path / "comparison.md").is_file() and not (tmp_path / "chart.png").exists()
