"""The package's layers import downward only (design.md "Layering"), checked on the source.

Each layer folder may import the layers listed for it and nothing else of ascjax. The
modules at the top level of the package (the front ends, the data plane and the report layer)
are not a layer; they may import the layers, never the reverse.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "ascjax"
#: layer -> the layers it may import (besides itself)
#: the data functions and tiles the registry binds
DATA = {"ops", "memory"}
ALLOWED = {"core": set(), "engine": {"core"}, "isa": {"core", "engine"} | DATA}


def _imports(path: pathlib.Path, root: pathlib.Path = PACKAGE) -> set[str]:
    """The ascjax sub-packages / top-level modules a module imports (first component after ``ascjax``)."""
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
        found.update(n[0] for n in names if n)
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


def test_the_data_functions_do_not_import_the_registry():
    for name in DATA:
        paths = sorted((PACKAGE / name).rglob("*.py")) if (PACKAGE / name).is_dir() else [PACKAGE / f"{name}.py"]
        for path in paths:
            assert "isa" not in _imports(path), f"{path.relative_to(PACKAGE)} imports the registry above it"


def test_the_checker_sees_a_wrong_import(tmp_path):
    probe = tmp_path / "ascjax" / "core" / "_probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("from ..engine import Record\nfrom . import _kinds\nimport ascjax.run\nfrom ascjax.pl import x\n")
    assert _imports(probe, tmp_path / "ascjax") == {"engine", "core", "run", "pl"}
