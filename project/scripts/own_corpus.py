"""Your own data as the `own` workflow's corpus: OUTPUT_DIR/train.spacy, dev.spacy and test.spacy.

python scripts/own_corpus.py OUTPUT_DIR --train TRAIN --dev DEV [--test TEST] [--lang en]

Each input is a .spacy file, a folder of them (merged into one), or for text classification a
JSONL file of labelled texts (or a folder of them), read by spacy_elmo's converter
(`python -m spacy_elmo convert-textcat`). Without --test, the development data is the test data.
"""

import shutil
import sys
from pathlib import Path

import spacy
import typer
from spacy.tokens import DocBin

from spacy_elmo.textcat_jsonl import SUFFIX, read_docs


def main(
    output_dir: Path = typer.Argument(..., file_okay=False),
    train: str = typer.Option("", "--train"),
    dev: str = typer.Option("", "--dev"),
    test: str = typer.Option("", "--test"),
    lang: str = typer.Option("en", "--lang"),
) -> None:
    if not train or not dev:
        sys.exit(
            "own_corpus.py: give your data: python -m spacy project run own . "
            "--vars.own_train /path/to/train.jsonl --vars.own_dev /path/to/dev.jsonl (or .spacy files)"
        )
    output_dir.mkdir(parents=True, exist_ok=True)
    nlp = spacy.blank(lang)
    for split, source in (("train", train), ("dev", dev), ("test", test or dev)):
        path = Path(source)
        if not path.exists():
            sys.exit(f"own_corpus.py: --{split} {path}: no such file or directory (give an absolute path)")
        target = output_dir / f"{split}.spacy"
        if path.is_file() and path.suffix == ".spacy":
            shutil.copyfile(path, target)
        else:
            try:
                docs = list(_docs(path, nlp))
            except (ValueError, OSError) as err:
                sys.exit(f"own_corpus.py: {err}")
            DocBin(docs=docs, store_user_data=False).to_disk(target)
        print(f"{target}: {len(DocBin().from_disk(target))} docs from {path}")


def _docs(path: Path, nlp):
    """A folder of .spacy files, merged; else JSONL of labelled texts (a file or a folder)."""
    spacy_files = sorted(path.rglob("*.spacy")) if path.is_dir() else []
    if spacy_files:
        for file in spacy_files:
            yield from DocBin().from_disk(file).get_docs(nlp.vocab)
        return
    if path.is_file() and path.suffix != SUFFIX:
        raise ValueError(f"{path}: expected a .spacy file, or a {SUFFIX} file of labelled texts")
    yield from read_docs(path, nlp.make_doc)


if __name__ == "__main__":
    typer.run(main)
