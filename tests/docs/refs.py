"""What the docs and the module docstrings point at, and whether it is there.

The scanner behind tests/docs/test_docs_refs.py, kept apart so a maintainer can run it on
its own (`python tests/docs/refs.py` lists every reference that does not resolve). Text is
read from docs/*.md and from the first docstring of every Python module of the repository;
code is read with `ast` (nothing is imported, so nothing heavy loads).

- A path: a word with a slash whose first part is one of the repository's top-level
  entries (training/, server/, tests/, ...), a path relative to the module's own folder
  or one of its parents (a docstring's `solvers/state.py`), `../shared/...`, or a bare
  file name ending in .py or .md (found anywhere in the repository or ../shared). A path
  with `<...>`, `*` or `N` placeholders is a pattern, checked by its fixed prefix.
- A named constant: an upper-case word with an underscore. It resolves when the code
  defines it (a module- or class-level name), reads it (a string literal: an environment
  variable), or a C++ or shell source uses it, or it is a gRPC status code or one of the
  operating system's (ELSEWHERE). Where the text
  gives its value right after it, `NAME` (VALUE) or NAME = VALUE, the value must match.
- A dotted name of three parts or more under training or server: the module exists and
  defines the name (and the class its attribute).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
CODE_DIRS = ("training", "server", "benchmarks", "tests")
OTHER_CODE = ("moses_ff", "docker", ".ci", "proto")
GRPC_CODES = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
              "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
              "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

PATH = re.compile(r"(?<![\w./$~-])((?:\.\./)*[A-Za-z_][\w.-]*(?:/[\w.*<>{}+-]+)+/?)")
BARE_FILE = re.compile(r"(?<![\w./-])([A-Za-z_][\w-]*\.(?:py|md))\b")
CONSTANT = re.compile(r"(?<![\w.])([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?![\w(])")
STATED = re.compile(r"`?([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`?\s*(?:\(|=\s*)([^),;:`]+)")
# three parts or more: two-part ones are mostly weight-file metadata keys (training.sentences)
DOTTED = re.compile(r"(?<![\w./])((?:training|server)(?:\.[A-Za-z_]\w*){2,})")
# Names of other things than our code: the operating system's.
ELSEWHERE = {"SO_REUSEADDR": "a socket option", "SO_REUSEPORT": "a socket option", "TIME_WAIT": "a TCP state"}


@dataclass(frozen=True)
class Problem:
    source: str   # the file the text is in
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.what}"


def texts() -> list[tuple[Path, int, str]]:
    """(file, first line, text) of every doc page and every module docstring."""
    out = [(p, 1, p.read_text(encoding="utf-8")) for p in sorted((ROOT / "docs").glob("*.md"))]
    for path in python_files():
        tree = _parse(path)
        doc = ast.get_docstring(tree, clean=False) if tree else None
        if doc:
            out.append((path, tree.body[0].lineno, doc))
    return out


def python_files() -> list[Path]:
    return sorted(p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py") if "_proto" not in p.parts)


@cache
def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), str(path))
    except SyntaxError:
        return None


def _fixed_prefix(path: str) -> str:
    """The part of a path pattern before its first placeholder."""
    cut = min((i for i in (path.find(c) for c in "<*{") if i >= 0), default=len(path))
    head = path[:cut]
    return head if cut == len(path) else head.rsplit("/", 1)[0]


def resolve_path(token: str, source: Path) -> bool | None:
    """True/False; None when the token is not one of ours (another project's path)."""
    token = token.rstrip("/.").split("#")[0]
    token = _fixed_prefix(token)
    if not token or token.startswith("./"):  # ./bjam: relative to wherever the reader stands
        return None
    if token.startswith("../"):
        parts = Path(token).parts
        if parts[:2] == ("..", "shared"):
            return (SHARED / Path(*parts[2:])).exists() if SHARED.is_dir() else None
        return None
    top = token.split("/")[0]
    if (ROOT / top).exists() and top not in ("data",):
        return (ROOT / token).exists()
    here = source.parent
    while True:
        if (here / token).exists():
            return True
        if here == ROOT:
            break
        here = here.parent
    return None


@cache
def _all_names() -> frozenset[str]:
    return frozenset(p.name for p in ROOT.rglob("*") if ".git" not in p.parts) | (
        frozenset(p.name for p in SHARED.iterdir()) if SHARED.is_dir() else frozenset())


@cache
def definitions() -> dict[str, list[tuple[Path, ast.expr | None]]]:
    """UPPER_CASE names the Python code defines (module or class level), with their value."""
    found: dict[str, list[tuple[Path, ast.expr | None]]] = {}
    for path in python_files():
        tree = _parse(path)
        if tree is None:
            continue
        bodies = [tree.body] + [n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
        for body in bodies:
            for node in body:
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, ast.AnnAssign) else []
                for t in targets:
                    if isinstance(t, ast.Name):
                        found.setdefault(t.id, []).append((path, node.value))
    return found


@cache
def _mentioned_in_code() -> frozenset[str]:
    """Words of the C++/shell/Docker sources, and the string literals of the Python code."""
    words: set[str] = set()
    for d in OTHER_CODE:
        for p in (ROOT / d).rglob("*"):
            if p.is_file() and p.suffix not in (".md",):
                try:
                    words.update(re.findall(r"[A-Z][A-Z0-9_]+", p.read_text(encoding="utf-8")))
                except UnicodeDecodeError:
                    pass
    for path in python_files():
        tree = _parse(path)
        if tree is not None:
            words.update(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                         and re.fullmatch(r"[A-Z][A-Z0-9_]+", n.value))
    return frozenset(words)


def _value(node: ast.expr | None):
    try:
        return eval(compile(ast.Expression(node), "<constant>", "eval"), {"__builtins__": {}}) if node else None
    except Exception:
        return None


def stated_value(text: str) -> list[float] | None:
    """The numbers a stated value may mean ("2^20", "1 << 18", "4 MB", "500k", "2M"), or None."""
    text = text.strip().strip('"`\'')
    m = re.fullmatch(r"(\d+)\s*/\s*(\d+)", text)
    if m:
        return [int(m.group(1)) / int(m.group(2))]
    m = re.match(r"(\d+(?:\.\d+)?)\s*%", text)
    if m:
        return [float(m.group(1)) / 100]
    m = re.fullmatch(r"(\d+)\s*(?:\^|\*\*)\s*(\d+)", text)
    if m:
        return [float(int(m.group(1)) ** int(m.group(2)))]
    m = re.fullmatch(r"(\d+)\s*<<\s*(\d+)", text)
    if m:
        return [float(int(m.group(1)) << int(m.group(2)))]
    m = re.match(r"(\d[\d,_]*(?:\.\d+)?)\s*(k|K|M|G|KB|MB|GB|KiB|MiB|GiB)?(?![\w.])", text)
    if not m:
        return None
    number = float(m.group(1).replace(",", "").replace("_", ""))
    unit = (m.group(2) or "").upper().replace("IB", "").replace("B", "") or None
    if unit is None:
        return [number]
    power = {"K": 1, "M": 2, "G": 3}[unit]
    return [number * 1000 ** power, number * 1024 ** power]


def problems() -> list[Problem]:
    """Every reference of the docs and the module docstrings that does not resolve."""
    return [p for source, first, text in texts() for p in problems_in(text, source, first)]


def problems_in(text: str, source: Path, first: int = 1) -> list[Problem]:
    """The references of TEXT (read as if it were in SOURCE, from line FIRST) that do not resolve."""
    found: list[Problem] = []
    defs = definitions()
    where = source.relative_to(ROOT) if source.is_relative_to(ROOT) else source
    for n, line in enumerate(text.splitlines(), first):
        for token in PATH.findall(line):
            if resolve_path(token, source) is False:
                found.append(Problem(str(where), n, f"path {token} does not exist"))
        for token in BARE_FILE.findall(line):
            if token not in _all_names() and resolve_path(token, source) is not True:
                found.append(Problem(str(where), n, f"file {token} does not exist"))
        for name in CONSTANT.findall(line):
            if name not in defs and name not in GRPC_CODES and name not in ELSEWHERE \
                    and name not in _mentioned_in_code():
                found.append(Problem(str(where), n, f"constant {name} is defined nowhere"))
        for name, said in STATED.findall(line):
            meant = stated_value(said)
            values = {_value(v) for _, v in defs.get(name, [])}
            numbers = {float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}
            if meant is not None and numbers and not any(abs(m - v) <= 1e-9 * max(1, abs(v))
                                                         for m in meant for v in numbers):
                found.append(Problem(str(where), n, f"{name} is {sorted(numbers)} in the code, "
                                                    f"the text says {said.strip()}"))
        for dotted in DOTTED.findall(line):
            if not resolve_dotted(dotted.rstrip(".")):
                found.append(Problem(str(where), n, f"{dotted} does not resolve"))
    return found


def resolve_dotted(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file():
            rest = parts[cut:]
            if not rest:
                return True
            tree = _parse(module)
            names = _top_names(tree) if tree else set()
            if rest[0] not in names:
                return False
            if len(rest) == 1:
                return True
            cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == rest[0]), None)
            return cls is None or rest[1] in _top_names(ast.Module(body=cls.body, type_ignores=[]))
    return False


def _top_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


if __name__ == "__main__":
    for problem in problems():
        print(problem)
