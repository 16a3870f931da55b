"""The package boundaries as tests: they fail the day a module reaches past one.

- No module imports another module's underscore (private) names.
- `training` never imports `server` (the server depends on training, not back).
- `server` imports from training only the parts it serves with: modelfile, features,
  errors, and the declared ranges of settings (constraints) (DESIGN.md: feature
  extraction exists once and the server imports it).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for package in ("training", "server") for p in (ROOT / package).rglob("*.py")
                 if "_proto" not in p.parts)
SERVER_MAY_IMPORT = ("training.modelfile", "training.features", "training.errors", "training.constraints")


def imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, imported name or None) for every import statement, nested ones too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
    return found


def ours(module: str) -> bool:
    return module.split(".")[0] in ("training", "server")


def test_the_scan_sees_the_tree():
    assert len(SOURCES) > 50
    assert any(module == "training.modelfile.model" for _, module, _ in imports(ROOT / "server/repository.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_names_cross_modules(path):
    bad = [f"{path.name}:{line}: from {module} import {name}" for line, module, name in imports(path)
           if ours(module) and name is not None and name.startswith("_") and name != "__version__"]
    bad += [f"{path.name}:{line}: import {module}" for line, module, _ in imports(path)
            if ours(module) and any(part.startswith("_") and part not in ("__init__", "_proto")
                                    for part in module.split("."))]
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


@pytest.mark.parametrize("path", [p for p in SOURCES if p.is_relative_to(ROOT / "training")],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_training_never_imports_server(path):
    bad = [f"{line}: {module}" for line, module, _ in imports(path) if module.split(".")[0] == "server"]
    text = path.read_text(encoding="utf-8")
    assert not bad and '"server.' not in text, f"{path} reaches into server/: {bad}"


@pytest.mark.parametrize("path", [p for p in SOURCES if p.is_relative_to(ROOT / "server")],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_server_imports_only_what_it_serves_with(path):
    bad = [f"{line}: {module}" for line, module, _ in imports(path)
           if module.split(".")[0] == "training" and module != "training"
           and not module.startswith(SERVER_MAY_IMPORT)]
    assert not bad, f"{path} imports training internals beyond {SERVER_MAY_IMPORT}: {bad}"
