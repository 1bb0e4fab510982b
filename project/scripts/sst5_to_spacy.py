"""SST-5 sentence files (Kim 2014's `stsa.fine.*`) -> .spacy, the five labels as exclusive
categories (`textcat`): OUTPUT_DIR/<input file name>.spacy for each input file.

python scripts/sst5_to_spacy.py OUTPUT_DIR stsa.fine.train stsa.fine.dev stsa.fine.test

One sentence a line: the label 0..4, a space, the tokenized, lower-cased text. Each line becomes
one doc whose words are the text's space-separated tokens (the treebank's own tokenization) and
whose `doc.cats` give 1.0 to the line's label and 0.0 to the four others. A line without a label
0..4, or without text, stops the conversion with an error naming the file and the line.
"""

from pathlib import Path
from typing import List

import spacy
import typer
from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab

#: Label 0..4 -> category name, in the order of the scale.
LABELS = ("very negative", "negative", "neutral", "positive", "very positive")


def read_sst5(path: Path, vocab: Vocab) -> List[Doc]:
    docs = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            label, _, text = line.strip().partition(" ")
            if label not in {str(i) for i in range(len(LABELS))} or not text.strip():
                raise ValueError(
                    f"{path}, line {number}: expected a label 0..4, a space and the sentence, "
                    f"got {line.strip()[:60]!r}"
                )
            words = text.split()
            doc = Doc(vocab, words=words, spaces=[True] * (len(words) - 1) + [False])
            doc.cats = {name: float(i == int(label)) for i, name in enumerate(LABELS)}
            docs.append(doc)
    return docs


def main(
    output_dir: Path = typer.Argument(..., file_okay=False),
    inputs: List[Path] = typer.Argument(..., exists=True, dir_okay=False),
) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    vocab = spacy.blank("en").vocab
    for input_path in inputs:
        try:
            docs = read_sst5(input_path, vocab)
        except ValueError as err:
            raise SystemExit(f"sst5_to_spacy.py: {err}") from None
        output_path = output_dir / f"{input_path.name}.spacy"
        DocBin(docs=docs, attrs=["ORTH"]).to_disk(output_path)
        counts = [sum(doc.cats[name] == 1.0 for doc in docs) for name in LABELS]
        per_label = ", ".join(f"{name} {n}" for name, n in zip(LABELS, counts))
        print(f"{output_path}: {len(docs)} docs, {sum(map(len, docs))} tokens ({per_label})")


if __name__ == "__main__":
    typer.run(main)
