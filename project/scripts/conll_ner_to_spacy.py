"""CoNLL-style NER files -> .spacy, with spaCy's own CoNLL NER converter: OUTPUT_DIR/<input name
without extension>.spacy for each input file.

python scripts/conll_ner_to_spacy.py OUTPUT_DIR wnut17train.conll emerging.dev.conll ... [-n 1]

Takes WNUT17 (token TAB IOB2 tag) and CoNLL-2003 newswire (`word POS chunk NER`, IOB1 tags, with
`-DOCSTART-` lines): the entity tag is the last column. Two things spaCy's `spacy convert
--converter ner` gets wrong on these files are fixed first:
- in wnut17train.conll most sentence breaks are lines holding a lone tab, which that converter
  does not take for breaks: they are made blank;
- CoNLL-2003's `-DOCSTART- -X- -X- O` lines (and spaCy's own `-DOCSTART- -X- O O` form) would
  become one-token documents, or make the converter ignore `--n-sents`: they are dropped, so
  docs are always groups of `--n-sents` sentences (1: the biLM reads one sentence per sequence).
"""

import re
from pathlib import Path
from typing import List, Tuple

import typer
from spacy.tokens import DocBin
from spacy.training.converters import conll_ner_to_docs

DOCSTART = re.compile(r"(?m)^-DOCSTART-(?:[ \t][^\n]*)?\n(?:[ \t]*\n)?")


def clean(text: str) -> Tuple[str, int]:
    """Blank the whitespace-only lines and drop the document markers; returns the text and how
    many markers there were."""
    text = re.sub(r"(?m)^[ \t]+$", "", text)
    text, n_markers = DOCSTART.subn("", text)
    return text, n_markers


def main(
    output_dir: Path = typer.Argument(..., file_okay=False),
    inputs: List[Path] = typer.Argument(..., exists=True, dir_okay=False),
    n_sents: int = typer.Option(1, "--n-sents", "-n", help="Sentences per doc"),
) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    for input_path in inputs:
        text, n_markers = clean(input_path.read_text(encoding="utf-8"))
        docs = list(conll_ner_to_docs(text, n_sents=n_sents, no_print=True))
        output_path = output_dir / f"{input_path.stem}.spacy"
        DocBin(docs=docs).to_disk(output_path)
        n_ents = sum(len(doc.ents) for doc in docs)
        dropped = f", {n_markers} -DOCSTART- lines dropped" if n_markers else ""
        print(f"{output_path}: {len(docs)} docs, {sum(map(len, docs))} tokens, {n_ents} entities{dropped}")


if __name__ == "__main__":
    typer.run(main)
