"""Where numba's compiled machine code is kept, whether a first run must compile, and
keeping each kernel to one compiled signature.

The hot loops are numba functions compiled with `cache=True`. Numba keeps that cache beside
the source (`__pycache__`) or under NUMBA_CACHE_DIR in a folder named by the source's
absolute path, so every clone, worktree or virtual environment compiled everything again
(a cold `pipeline` spends most of its time compiling). `install()` puts a cache locator of
ours first in numba's list, for this package's modules only:

- one cache per user: NUMBA_CACHE_DIR when it is set, else $XDG_CACHE_HOME/moses-reorder/numba
  (~/.cache/moses-reorder/numba), so a second clone of the same sources compiles nothing;
- entries keyed by content, not by path: a module's folder is named by the SHA-256 of its
  source and of every module of this package it imports, transitively. Numba itself checks
  only the function's own file, but a kernel's machine code contains the kernels and
  constants it takes from other modules, so a clone with a changed callee must not load it;
  checkouts of different versions then keep their own entries side by side (a few MB each;
  remove the folder to reclaim them);
- a cache folder that cannot be written (a container run with --read-only) is still read:
  its entries are copied to a writable folder under the temporary directory, which takes
  the new ones.

`install()` must run before the first kernel module is imported and must not import numba
itself (`moses-reorder --help` stays fast): training/__init__.py calls it, and it hooks
numba's caching module as it is imported. This module never compiles anything.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import os
import re
import shutil
import sys
import tempfile
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

PACKAGES = ("training", "server")  # whose kernels the locator keeps; anything else is numba's
CACHE_ENV = "NUMBA_CACHE_DIR"  # numba's own override: honoured, so one variable moves every cache


def cache_root() -> Path:
    """The per-user cache folder: NUMBA_CACHE_DIR, else the XDG cache folder's moses-reorder/numba."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "moses-reorder" / "numba"


def fallback_root() -> Path:
    """Where entries go when cache_root() cannot be written (one folder per user)."""
    return Path(tempfile.gettempdir()) / f"moses-reorder-numba-{os.getuid()}"


def _module_file(root: str, name: str) -> str | None:
    """The source of module `name` under the folder `root` that holds our packages."""
    base = Path(root).joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return str(candidate)
    return None


_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n]+)", re.M)


@lru_cache(maxsize=None)
def _imports(root: str, name: str) -> tuple[str, ...]:
    """This package's modules that module `name` imports (absolute or relative, anywhere in
    it). Read with two regular expressions, not by parsing: this runs on every start-up, for
    every kernel module; a match inside a string only adds a module to the digest."""
    path = _module_file(root, name)
    text = Path(path).read_text(encoding="utf-8")
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = set()
    for line in _IMPORT.findall(text):
        found.update(part.split()[0] for part in line.split("#")[0].split(",") if part.strip())
    for base, names in _FROM_IMPORT.findall(text):
        if base.startswith("."):
            level = len(base) - len(base.lstrip("."))
            parts = package.split(".")
            anchor = ".".join(parts[: len(parts) - level + 1])
            base = f"{anchor}.{base.lstrip('.')}" if base.lstrip(".") else anchor
        found.add(base)
        for part in names.strip("()").split("#")[0].split(","):  # `from pkg import module`
            if part.split():
                found.add(f"{base}.{part.split()[0]}")
    return tuple(sorted(n for n in found if n.partition(".")[0] in PACKAGES and _module_file(root, n)))


@lru_cache(maxsize=None)
def source_digest(root: str, module: str) -> str:
    """SHA-256 over the source of `module` and of every module of ours it imports, transitively
    (`root`: the folder holding the packages)."""
    seen: dict[str, str] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        path = _module_file(root, name)
        if name in seen or path is None:
            continue
        seen[name] = path
        todo.extend(_imports(root, name))
    digest = hashlib.sha256()
    for name in sorted(seen):
        digest.update(name.encode() + b"\0" + Path(seen[name]).read_bytes() + b"\0")
    return digest.hexdigest()


def package_root(module: str, py_file: str) -> str | None:
    """The folder holding our packages, if `py_file` is the source of `module` under it."""
    path = Path(os.path.abspath(py_file))
    parts = module.split(".")
    if path.name == "__init__.py":
        path = path.parent
    else:
        path = path.with_suffix("")
    if list(path.parts[-len(parts):]) != parts:
        return None
    return str(Path(*path.parts[: -len(parts)]))


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
        return True
    except OSError:
        return False


def _seed(source: Path, target: Path) -> None:
    """Copy a read-only cache folder's entries into the writable one (each file atomically)."""
    if not source.is_dir():
        return
    for entry in source.iterdir():
        dest = target / entry.name
        if entry.is_file() and not dest.exists():
            tmp = target / f".{entry.name}.{os.getpid()}.tmp"
            shutil.copyfile(entry, tmp)
            os.replace(tmp, dest)


@lru_cache(maxsize=None)
def cache_folder(root: str, module: str) -> Path | None:
    """The folder numba keeps `module`'s kernels in, made writable; None when none can be."""
    name = f"{module}-{source_digest(root, module)[:16]}"
    primary = cache_root() / name
    if _writable(primary):
        return primary
    fallback = fallback_root() / name
    if not _writable(fallback):
        return None
    _seed(primary, fallback)
    return fallback


def _locator_class(caching):
    """Our numba cache locator (defined once numba's caching module exists)."""

    class UserCacheLocator(caching._CacheLocator):
        def __init__(self, py_func, py_file, folder: Path, stamp: str):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._folder, self._stamp = str(folder), stamp

        def ensure_cache_path(self):
            os.makedirs(self._folder, exist_ok=True)

        def get_cache_path(self):
            return self._folder

        def get_source_stamp(self):
            return self._stamp

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            module = getattr(py_func, "__module__", None) or ""
            root = package_root(module, py_file) if module.partition(".")[0] in PACKAGES else None
            if root is None:
                return None  # not one of our modules (or one run as __main__): numba's own locators
            folder = cache_folder(root, module)
            return None if folder is None else cls(py_func, py_file, folder, source_digest(root, module))

    return UserCacheLocator


def _register(caching) -> None:
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")
    if not any(c.__name__ == "UserCacheLocator" for c in impl._locator_classes):
        impl._locator_classes.insert(0, _locator_class(caching))


class _AfterNumbaCaching(importlib.abc.MetaPathFinder):
    """Registers the locator as soon as numba.core.caching has run, before any kernel exists."""

    def find_spec(self, name, path, target=None):
        if name != "numba.core.caching":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _register(module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Make numba keep this package's kernels in the per-user, content-keyed cache."""
    caching = sys.modules.get("numba.core.caching")
    if caching is not None:
        _register(caching)
    elif not any(isinstance(f, _AfterNumbaCaching) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterNumbaCaching())


def is_cold(dispatcher) -> bool:
    """True if `dispatcher` (an @njit(cache=True) function) has no cache index on disk yet:
    calling it will compile. False when numba's cache cannot be inspected (say nothing)."""
    try:
        index = dispatcher._cache._cache_file._index_path  # numba.core.caching.IndexDataCacheFile
    except AttributeError:
        return False
    return not os.path.exists(index)


class CompileClock:
    """Seconds numba spent compiling inside a `compiling()` block (outermost compiles, so a
    kernel's callees are not counted twice)."""

    seconds = 0.0


@contextmanager
def compiling():
    """Measure numba's compiling in the block: a first run's figures then say what is the
    work and what is the one-time compile (numba.core.event's "numba:compile" timer)."""
    from numba.core import event

    clock = CompileClock()
    with event.install_timer("numba:compile", lambda seconds: setattr(clock, "seconds", seconds)):
        yield clock


def readonly(array):
    """A read-only view of `array`. Numba compiles a kernel once per argument type, and a
    writable and a read-only array are two types: a kernel fed memory-mapped (read-only)
    arrays on one path and arrays in memory on another compiles twice unless both are
    passed as read-only views."""
    view = array.view()
    view.flags.writeable = False
    return view


FIRST_RUN_NOTE = ("first run for this user: compiling the numba functions (about 25 s, once; later runs "
                  "and other clones load them from the cache in {root})")
