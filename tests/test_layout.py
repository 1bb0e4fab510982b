"""The package's structure, as a newcomer relies on it: ``nn/`` is plain PyTorch, no modules
import each other in a cycle, and every registered function resolves in a fresh process from
the installed entry points alone."""

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Set

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "spacy_elmo"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> Set[str]:
    """Every module this file imports (at any depth of the file: function-level imports too)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def _graph() -> Dict[str, Set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in _imports(path) if m in files and m != name} for name, path in files.items()}


def test_nn_imports_neither_spacy_nor_thinc():
    for path in (PACKAGE / "nn").rglob("*.py"):
        roots = {name.split(".")[0] for name in _imports(path)}
        assert not roots & {"spacy", "thinc"}, f"{path} imports {roots & {'spacy', 'thinc'}}"


def test_no_import_cycles_in_the_package():
    graph = _graph()
    # A package's __init__ re-exporting its submodules is not a cycle of logic: leave those edges out.
    edges = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}
    state: Dict[str, int] = {}
    path = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                cycle = path[path.index(target):] + [target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)


def test_every_registered_function_resolves_in_a_fresh_process():
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    architectures = re.findall(r'"(spacy_elmo\.\w+\.v\d+) = spacy_elmo\.architectures:', setup)
    misc = re.findall(r'"(spacy_elmo\.\w+\.v\d+) = spacy_elmo\.loaders:', setup)
    assert "spacy_elmo.ElmoEmbedder.v1" in architectures and misc
    script = textwrap.dedent(
        f"""
        import sys
        from spacy.util import registry
        assert "spacy_elmo" not in sys.modules
        for name in {architectures!r}:
            assert callable(registry.architectures.get(name)), name
        for name in {misc!r}:
            assert callable(registry.misc.get(name)), name
        import spacy
        assert spacy.blank("en").add_pipe("elmo").name == "elmo"
        print("resolved", len({architectures!r}) + len({misc!r}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd="/", capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"resolved {len(architectures) + len(misc)}" in result.stdout
