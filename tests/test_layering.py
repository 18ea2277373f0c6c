"""The package's layers import downward only (design.md "Layering"), checked on the source.

Every module lives in a layer folder; each folder may import the layers listed for it and
nothing else of ascjax. Only the package's ``__init__`` (the public names) and ``__main__``
sit above them.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "ascjax"
#: layer -> the layers it may import (besides itself), bottom to top
ALLOWED = {
    "core": set(),
    "engine": {"core"},
    "isa": {"core", "engine"},
    "report": {"core", "engine"},
    "front": {"core", "engine", "isa"},
    "runner": {"core", "engine", "isa", "front", "report"},
    "pypto_pro": {"core", "engine", "isa", "front", "report", "runner"},
    "tools": {"core", "engine", "isa", "front", "report", "runner", "pypto_pro"},
}
#: the data functions the registry binds (inside ``isa``)
DATA = PACKAGE / "isa" / "ops"


def _imports(path: pathlib.Path, root: pathlib.Path = PACKAGE, depth: int = 1) -> set[str]:
    """What of ascjax a module imports: the first ``depth`` components after ``ascjax``, dotted."""
    rel = path.relative_to(root).with_suffix("")
    here = list(rel.parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = base + (node.module.split(".") if node.module else [])
                names = [target] if node.module else [base + [a.name] for a in node.names]
            elif node.module and node.module.split(".")[0] == "ascjax":
                names = [node.module.split(".")[1:]]
            else:
                continue
        elif isinstance(node, ast.Import):
            names = [a.name.split(".")[1:] for a in node.names if a.name.split(".")[0] == "ascjax"]
        else:
            continue
        found.update(".".join(n[:depth]) for n in names if n)
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(layer):
    folder = PACKAGE / layer
    assert (folder / "README.md").is_file(), f"{layer}/ needs a README line saying what it holds and may import"
    for path in sorted(folder.rglob("*.py")):
        outside = _imports(path) - {layer} - ALLOWED[layer]
        assert not outside, (
            f"{path.relative_to(PACKAGE)} imports {sorted(outside)}; {layer} may import {sorted(ALLOWED[layer]) or 'nothing'}"
        )


def test_the_layers_form_no_cycle():
    for layer, below in ALLOWED.items():
        for other in below & set(ALLOWED):
            assert layer not in ALLOWED[other], f"{layer} and {other} import each other"


def test_every_module_lives_in_a_layer():
    top = {p.name for p in PACKAGE.glob("*.py")}
    assert top == {"__init__.py", "__main__.py"}, (
        f"modules outside a layer folder: {sorted(top - {'__init__.py', '__main__.py'})}"
    )
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(ALLOWED), f"package folders {sorted(folders)} are not the layers {sorted(ALLOWED)}"


def test_the_data_functions_do_not_import_the_registry():
    for path in sorted(DATA.rglob("*.py")):
        registry = {m for m in _imports(path, depth=2) if m.startswith("isa") and m != "isa.ops"}
        assert not registry, f"{path.relative_to(PACKAGE)} imports the registry above it: {sorted(registry)}"


def test_the_checker_sees_a_wrong_import(tmp_path):
    probe = tmp_path / "ascjax" / "core" / "_probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("from ..engine import Record\nfrom . import _kinds\nimport ascjax.run\nfrom ascjax.pl import x\n")
    assert _imports(probe, tmp_path / "ascjax") == {"engine", "core", "run", "pl"}
    ops_probe = tmp_path / "ascjax" / "isa" / "ops" / "_probe.py"
    ops_probe.parent.mkdir(parents=True)
    ops_probe.write_text("from .._registry import register\nfrom . import cube\nfrom ...core import Pipe\n")
    assert _imports(ops_probe, tmp_path / "ascjax", depth=2) == {"isa._registry", "isa.ops", "core"}


#: Where the package names its own modules and objects in words: the docs, the README, the folders' READMEs and the
#: docstrings and comments of the source.
NAMED_IN = [*PACKAGE.parent.joinpath("docs").rglob("*.md"), PACKAGE.parent / "README.md", *PACKAGE.rglob("*.md"),
            *PACKAGE.rglob("*.py")]  # fmt: skip
DOTTED = re.compile(r"\bascjax(?:\.[A-Za-z_]\w*)+")


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` (``ascjax.x.y``) is a module of the package or an attribute of one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for part in parts[i:]:
                found = getattr(found, part)
        except AttributeError:
            return False
        return True
    return False


def test_every_ascjax_name_in_the_docs_and_the_source_resolves():
    """A module moved between layers leaves no stale ``ascjax.x`` behind in words (the installed ``ascjax`` command
    once named ``ascjax.cli``, which had moved to ``ascjax.tools.cli``)."""
    named = {m.group(0).rstrip(".") for path in NAMED_IN for m in DOTTED.finditer(path.read_text(errors="ignore"))}
    assert len(named) > 50
    assert [name for name in sorted(named) if not _resolves(name)] == []
    assert not _resolves("ascjax.cli") and not _resolves("ascjax.runner._planes.no_such_name")
