"""The package's structure, as a newcomer relies on it: ``nn/`` is plain PyTorch, modules import
only from their own layer or below (never upward, never in a cycle) and never the checkout's
measurement kit, the core names no weight format, one function decides which weights a reference
means, and every registered function resolves in a fresh process from the installed entry points
alone."""

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


def _type_checking_only(tree: ast.Module) -> Set[ast.AST]:
    """The imports under ``if TYPE_CHECKING:``: annotations only, never run, so no dependency."""
    blocks = [n for n in ast.walk(tree) if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]
    return {node for block in blocks for statement in block.body for node in ast.walk(statement)}


def _imports(path: Path) -> Set[str]:
    """Every module this file imports at run time (at any depth of the file: function-level imports
    too)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    annotations_only = _type_checking_only(tree)
    for node in ast.walk(tree):
        if node in annotations_only:
            continue
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


#: The layers, lowest first: a module may import from its own layer and the ones below.
LAYERS = [
    ("foundation", ["chars", "files", "text_files", "validation", "options", "batching", "sentences", "doc_output", "stopping"]),
    ("token ids", ["indexers"]),
    ("PyTorch model", ["nn"]),
    ("processes (torchrun)", ["distributed"]),
    ("weight formats", ["formats"]),
    ("released models by name", ["hub"]),
    ("the weights resolver", ["sources"]),
    ("Thinc layers and spaCy readers", ["layers", "loaders", "architectures", "textcat_jsonl"]),
    ("spaCy pipe", ["pipe"]),
    ("jobs the commands run", ["embedding", "pretrain", "bench"]),
    ("commands", ["cli", "__main__"]),
]

def _layer(module: str) -> int:
    """The index in LAYERS of the longest prefix that names ``module`` (the package: top)."""
    if module == "spacy_elmo":
        return len(LAYERS)
    name = module[len("spacy_elmo."):]
    best, best_length = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    assert best is not None, f"{module} is in no layer of LAYERS: add it"
    return best


def test_the_package_never_imports_the_measurement_kit():
    """``benchmarks/`` sits beside the package in a checkout and is not installed: an import of it
    from ``spacy_elmo`` works in a checkout and fails for every user of the wheel."""
    importers = sorted(
        _module_name(path) for path in PACKAGE.rglob("*.py")
        if any(name == "benchmarks" or name.startswith("benchmarks.") for name in _imports(path))
    )
    assert not importers, importers


def test_no_module_imports_upward():
    upward = [
        f"{module} ({LAYERS[_layer(module)][0]}) imports {target} ({LAYERS[_layer(target)][0]})"
        for module, targets in _graph().items()
        for target in targets
        if not module.startswith(target + ".") and _layer(target) > _layer(module)
    ]
    assert not upward, "\n".join(upward)


#: What naming a weight format looks like in code (docstrings and comments aside).
FORMAT_WORDS = ("hdf5", "safetensors", "elmoformanylangs", "lexicon", ".pkl", "char.dic", "word.dic", "h5py")


def _code_strings_and_names(path: Path) -> Set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found.add(node.value)
        elif isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
    return found | _imports(path)


def test_the_core_knows_no_weight_format():
    """options.py (the shape) and nn/ (the model) neither import nor name a format: formats are
    readers in formats/, and a new one touches nothing here."""
    for path in [PACKAGE / "options.py", *(PACKAGE / "nn").rglob("*.py")]:
        roots = {name for name in _imports(path) if name.startswith(("spacy_elmo.formats", "spacy_elmo.hub"))}
        assert not roots, f"{path} imports {roots}"
        named = {word for text in _code_strings_and_names(path) for word in FORMAT_WORDS if word in text.lower()}
        assert not named, f"{path} names a weight format: {named}"


def test_one_function_decides_which_weights_a_reference_means():
    """sources.resolve_weight_source is the only user of the resolution steps (a model
    directory's files, two named files, a downloaded model by name, the bundled default)."""
    steps = {
        "spacy_elmo.formats.locate_model_dir",
        "spacy_elmo.formats.weight_file_source",
        "spacy_elmo.hub.cache.model_dir",
        "spacy_elmo.hub.model_dir",
        "spacy_elmo.sources.DEFAULT_MODEL",
        "spacy_elmo.DEFAULT_MODEL",
    }
    users = {
        _module_name(path): _imports(path) & steps
        for path in PACKAGE.rglob("*.py")
        if _imports(path) & steps
    }
    allowed = {"spacy_elmo.sources", "spacy_elmo.hub", "spacy_elmo"}  # the resolver; re-exports
    assert set(users) <= allowed, {m: u for m, u in users.items() if m not in allowed}


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
    readers = re.findall(r'"(spacy_elmo\.\w+\.v\d+) = spacy_elmo\.textcat_jsonl:', setup)
    assert "spacy_elmo.ElmoEmbedder.v2" in architectures and misc and readers
    script = textwrap.dedent(
        f"""
        import sys
        from spacy.util import registry
        assert "spacy_elmo" not in sys.modules
        for name in {architectures!r}:
            assert callable(registry.architectures.get(name)), name
        for name in {misc!r}:
            assert callable(registry.misc.get(name)), name
        for name in {readers!r}:
            assert callable(registry.readers.get(name)), name
        import spacy
        assert spacy.blank("en").add_pipe("elmo").name == "elmo"
        print("resolved", len({architectures!r}) + len({misc!r}) + len({readers!r}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd="/", capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"resolved {len(architectures) + len(misc) + len(readers)}" in result.stdout
