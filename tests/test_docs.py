"""The docs as a reader meets them: the README fits on a few screens, the guide for training on
your own data stays short, guides carry no history, every link leads somewhere, every results
page says how and when it was measured, the demo's output in its guide is what the demo prints,
and the design page names every module. The reference is checked against the code in
``test_reference.py``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = sorted([REPO / "README.md", REPO / "project" / "README.md", *DOCS.rglob("*.md")])


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_readme_and_the_own_data_guide_stay_short():
    assert _lines(REPO / "README.md") <= 150
    assert _lines(DOCS / "guide" / "own-data.md") <= 300


@pytest.mark.parametrize("page", sorted(path.name for path in (DOCS / "guide").glob("*.md")))
def test_guides_carry_no_history(page):
    """A guide says how to do a task: no dates, issue numbers, machine names or earlier defaults
    (the figures a user needs to decide link to docs/results/, which has them)."""
    text = (DOCS / "guide" / page).read_text(encoding="utf-8")
    found = re.findall(
        r"\b20\d\d-\d\d-\d\d\b|\bissue \d+|\b(?:Xeon|EPYC|H100|H200|A100)\b|\bprevious defaults?\b|\bcommit [0-9a-f]{7}",
        text,
    )
    assert not found, found


def _anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set:
    found: Dict[str, int] = {}
    anchors = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (match := re.match(r"#{1,6} (.+)", line)):
            anchor = _anchor(match.group(1))
            anchors.add(anchor if anchor not in found else f"{anchor}-{found[anchor]}")
            found[anchor] = found.get(anchor, 0) + 1
    return anchors


def _links(path: Path) -> Iterator[Tuple[str, str]]:
    """(target, anchor) of every relative Markdown link outside code blocks."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if not re.match(r"[a-z]+:", target):
            file, _, anchor = target.partition("#")
            yield file, anchor


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(REPO)))
def test_every_link_leads_somewhere(page):
    broken: List[str] = []
    for file, anchor in _links(page):
        target = (page.parent / file).resolve() if file else page
        if not target.exists():
            broken.append(f"{file}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{file}#{anchor}: no such heading")
    assert not broken, broken


@pytest.mark.parametrize(
    "page", sorted(p.name for p in (DOCS / "results").glob("*.md") if p.name not in ("README.md", "comparison.md"))
)
def test_every_results_page_says_how_and_when(page):
    """A measurement comes with its command and its date (the machine is named with each run)."""
    text = (DOCS / "results" / page).read_text(encoding="utf-8")
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", text), "no date"
    assert "python -m " in text, "no command"


def test_the_demos_output_in_its_guide_is_what_the_demo_prints():
    """The guide shows the demo's whole output on the bundled model: the same text, line for line,
    with every printed figure equal, except that a cosine printed to 3 decimals may differ by one
    in its last digit on a CPU whose float32 kernels sum in another order."""
    from spacy_elmo.cli import app

    text = (DOCS / "guide" / "senses.md").read_text(encoding="utf-8")
    shown = re.search(r"```\n\$ python -m spacy_elmo demo\n(.*?)```", text, re.DOTALL).group(1)
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    number = re.compile(r"\d+\.\d{3}\b")
    assert number.sub("#", result.output) == number.sub("#", shown)
    for printed, documented in zip(number.findall(result.output), number.findall(shown)):
        assert abs(float(printed) - float(documented)) <= 0.0015, (printed, documented)


def test_the_design_page_names_every_module():
    """Its layout lists each module of the package root, ``nn/`` and ``layers/``, and every
    subpackage."""
    text = (DOCS / "design.md").read_text(encoding="utf-8")
    package = REPO / "spacy_elmo"
    names = [p.name for folder in (package, package / "nn", package / "layers") for p in folder.glob("*.py")]
    names += [f"{p.name}/" for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    missing = [name for name in names if name != "__main__.py" and not re.search(rf"\b{re.escape(name)}", text)]
    assert not missing, missing
