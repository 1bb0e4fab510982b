"""WNUT17 (token TAB IOB2-tag lines, a blank line after each sentence) -> .spacy, with spaCy's own
CoNLL NER converter: OUTPUT_DIR/<input name without extension>.spacy for each input file.

python scripts/wnut17_to_spacy.py OUTPUT_DIR wnut17train.conll emerging.dev.conll ... [-n 1]

Why not `spacy convert --converter ner` directly: in wnut17train.conll most sentence breaks are
lines holding a lone tab, which that converter does not take for breaks; they are made blank here.
"""

import re
from pathlib import Path
from typing import List

import typer
from spacy.tokens import DocBin
from spacy.training.converters import conll_ner_to_docs


def main(
    output_dir: Path = typer.Argument(..., file_okay=False),
    inputs: List[Path] = typer.Argument(..., exists=True, dir_okay=False),
    n_sents: int = typer.Option(1, "--n-sents", "-n", help="Sentences per doc"),
) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    for input_path in inputs:
        text = re.sub(r"(?m)^[ \t]+$", "", input_path.read_text(encoding="utf-8"))
        docs = list(conll_ner_to_docs(text, n_sents=n_sents, no_print=True))
        output_path = output_dir / f"{input_path.stem}.spacy"
        DocBin(docs=docs).to_disk(output_path)
        n_ents = sum(len(doc.ents) for doc in docs)
        print(f"{output_path}: {len(docs)} docs, {sum(map(len, docs))} tokens, {n_ents} entities")


if __name__ == "__main__":
    typer.run(main)
