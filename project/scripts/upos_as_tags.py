"""Copy each token's UPOS (Token.pos_) into Token.tag_ in the .spacy files of a directory, in place,
so that spaCy's `tagger` learns and is scored (`tag_acc`) on UD's universal POS tags instead of
the treebank's XPOS (Penn Treebank) tags, which `spacy convert --converter conllu` puts there.

python scripts/upos_as_tags.py CORPUS_DIR
"""

from pathlib import Path

import spacy
import typer
from spacy.tokens import DocBin


def main(corpus_dir: Path = typer.Argument(..., exists=True, file_okay=False)) -> None:
    vocab = spacy.blank("en").vocab
    for path in sorted(corpus_dir.glob("*.spacy")):
        docs = list(DocBin().from_disk(path).get_docs(vocab))
        for doc in docs:
            for token in doc:
                token.tag_ = token.pos_
        DocBin(docs=docs).to_disk(path)
        print(f"{path}: {len(docs)} docs, UPOS copied into Token.tag_")


if __name__ == "__main__":
    typer.run(main)
