"""Cut the demo slices in demo_data/ from the full corpora (run once; the slices are committed).

python scripts/make_demo_data.py ASSETS_DIR demo_data

Sentences are taken at an even stride through each file, so every genre of the corpus appears.
CoNLL-U slices keep the ten columns but only the comments and MISC values spaCy's converter reads
(sent_id, text, SpaceAfter=No), to stay small.
"""

import sys
from pathlib import Path
from typing import List

SLICES = {
    # source file (under ASSETS_DIR) -> (file under demo_data, sentences)
    "ud-english-ewt/en_ewt-ud-train.conllu": ("ud-english-ewt/train.conllu", 300),
    "ud-english-ewt/en_ewt-ud-dev.conllu": ("ud-english-ewt/dev.conllu", 80),
    "ud-english-ewt/en_ewt-ud-test.conllu": ("ud-english-ewt/test.conllu", 150),
    "wnut17/wnut17train.conll": ("wnut17/train.conll", 500),
    "wnut17/emerging.dev.conll": ("wnut17/dev.conll", 150),
    "wnut17/emerging.test.annotated": ("wnut17/test.conll", 300),
}
WIKITEXT = {
    "wikitext-2/train.txt": ("wikitext-2/train.txt", 250),
    "wikitext-2/valid.txt": ("wikitext-2/valid.txt", 40),
}


def blocks(path: Path) -> List[List[str]]:
    """Sentences of a CoNLL file: groups of lines separated by blank (or whitespace-only) lines."""
    sents, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            current.append(line)
        elif current:
            sents.append(current)
            current = []
    if current:
        sents.append(current)
    return sents


def every_kth(items: list, n: int) -> list:
    return [items[i * len(items) // n] for i in range(min(n, len(items)))]


def slim_conllu(lines: List[str]) -> List[str]:
    out = []
    for line in lines:
        if line.startswith("#"):
            if line.startswith(("# sent_id", "# text ")):
                out.append(line)
            continue
        cols = line.split("\t")
        cols[8] = "_"
        cols[9] = "SpaceAfter=No" if "SpaceAfter=No" in cols[9].split("|") else "_"
        out.append("\t".join(cols))
    return out


def main(assets: Path, out: Path) -> None:
    for source, (dest, n) in SLICES.items():
        sents = every_kth(blocks(assets / source), n)
        if source.endswith(".conllu"):
            sents = [slim_conllu(s) for s in sents]
        (out / dest).parent.mkdir(parents=True, exist_ok=True)
        (out / dest).write_text("".join("\n".join(s) + "\n\n" for s in sents), encoding="utf-8")
    for source, (dest, n) in WIKITEXT.items():
        # Paragraph lines only (no headings, no blank lines), evenly spaced through the file.
        lines = [line for line in (assets / source).read_text(encoding="utf-8").splitlines()
                 if line.strip() and not line.strip().startswith("=")]
        (out / dest).parent.mkdir(parents=True, exist_ok=True)
        text = "".join(line.strip() + "\n" for line in every_kth(lines, n))
        (out / dest).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
