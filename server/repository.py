"""The model repository: ROOT/<name>/<version>/model.<ext>, loaded, validated and hot-swapped.

Layout as in Triton: a model name is a directory, a version is a positive-integer
subdirectory holding exactly one `model.*` weight file (training.modelfile.layout, the
rules `pipeline` publishes by). A scan (polling thread or the admin Reload RPC) loads new
versions completely -- read into memory, checksum, schema check and a one-pair warm-up score, all
in `load_model` -- before publishing a new immutable `ModelSnapshot` by a single
reference assignment. A request takes the snapshot once and keeps its `ServedModel`, so
it finishes on the version it started with even if that version is unloaded meanwhile
(its bytes live as long as a reference does; a file changed under a loaded version is
reported, never re-read). The newest `keep_versions` loadable
versions stay loaded for clients that pinned one. A broken file leaves what was serving
in place and is recorded as FAILED (shown by GetModel, logged); it is retried only when
the file changes. A name's schema (Moses type, classes, directions, outputs) is fixed
while any version of it is served: a version with another schema is refused.

This module must not read weight files or compute features itself: `training.modelfile.model`
and `training.modelfile.request` do that. It knows nothing of gRPC.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any

from training.errors import InputError, MosesReorderError
from training.modelfile.layout import find_model_file, model_dirs, version_dirs
from training.modelfile.model import LoadedModel, load_model

from server.echo import clip
from server.logs import log_event

LOADED, FAILED, UNLOADED = "LOADED", "FAILED", "UNLOADED"


class UnknownModel(LookupError):
    """No model of that name in the repository."""


class VersionNotLoaded(LookupError):
    """The name exists but the requested version is not loaded (or nothing is)."""


@dataclass(frozen=True)
class Schema:
    """What a decoder relies on; may not change while a name is served."""

    moses_type: str
    classes: tuple[str, ...]
    directions: tuple[str, ...]
    outputs: tuple[str, ...]
    context: bool = False   # answers with context blocks (neighbour features), not probabilities

    def describe(self) -> str:
        return f"{self.moses_type} (outputs {', '.join(self.outputs)}" + (", with context)" if self.context else ")")


@dataclass(frozen=True)
class ServedModel:
    """One loaded, validated version. Immutable; shared by every request that uses it."""

    name: str
    version: int
    path: Path
    model: LoadedModel
    schema: Schema
    family: str
    metadata_json: str


@dataclass(frozen=True)
class VersionRecord:
    """What the repository knows about one version directory."""

    version: int
    state: str                      # LOADED, FAILED or UNLOADED
    message: str = ""               # for clients (GetModel, errors): never a server path
    signature: tuple | None = None  # (file name, size, mtime_ns, inode) of the file tried
    detail: str = ""                # for the server's log: the full error, paths included


@dataclass(frozen=True)
class ModelSnapshot:
    """Immutable view of one name: its loaded versions and every version's status."""

    name: str
    loaded: Mapping[int, ServedModel]
    records: Mapping[int, VersionRecord]
    schema: Schema | None

    @property
    def loaded_versions(self) -> tuple[int, ...]:
        return tuple(sorted(self.loaded))

    @property
    def newest(self) -> ServedModel | None:
        return self.loaded[max(self.loaded)] if self.loaded else None

    def resolve(self, version: int) -> ServedModel:
        """The newest loaded version (version 0) or exactly `version`."""
        if version == 0:
            served = self.newest
            if served is None:
                raise VersionNotLoaded(f"model {self.name!r} has no loaded version ({self.failure_summary()})")
            return served
        served = self.loaded.get(version)
        if served is None:
            record = self.records.get(version)
            why = f"its state is {record.state}" + (f": {record.message}" if record.message else "") \
                if record else "no such version directory"
            raise VersionNotLoaded(
                f"model {self.name!r} version {version} is not loaded ({why}); "
                f"loaded versions: {list(self.loaded_versions) or 'none'}")
        return served

    def failure_summary(self, detailed: bool = False) -> str:
        """Why nothing is loaded: per FAILED version its client-safe message, or with
        `detailed` (for the server's log) the full error with paths."""
        failed = [f"v{r.version}: {(r.detail or r.message) if detailed else r.message}"
                  for r in sorted(self.records.values(), key=lambda r: r.version) if r.state == FAILED]
        return "; ".join(failed) if failed else "no version directory holds a model file"


def _file_signature(path: Path) -> tuple:
    st = path.stat()
    return (path.name, st.st_size, st.st_mtime_ns, st.st_ino)


def model_schema(model: LoadedModel) -> Schema:
    """The schema of a loaded model. `load_model` has already checked it against the model's
    Moses type and scored a warm-up pair (shape, finiteness, per-direction sums), raising
    ModelFileError naming the file if anything disagreed."""
    return Schema(str(model.moses_type), tuple(model.classes), tuple(model.directions), tuple(model.outputs),
                  model.has_context)


def _without_paths(value: Any) -> Any:
    """The metadata as clients may see it: absolute paths (e.g. `training.store`, where the
    trainer's example store was) reduced to their last component."""
    if isinstance(value, dict):
        return {k: _without_paths(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_paths(v) for v in value]
    if isinstance(value, str) and value.startswith("/") and "\n" not in value:
        return PurePosixPath(value).name
    return value


def _metadata_json(metadata: Any) -> str:
    """GetModel's metadata_json: the file's metadata without absolute paths."""
    try:
        return json.dumps(_without_paths(metadata), sort_keys=True, default=str)
    except (TypeError, ValueError):
        return json.dumps({"unserializable_metadata": repr(metadata)})


def load_served_model(name: str, version: int, path: Path) -> ServedModel:
    """Load and validate one version (raises MosesReorderError subclasses on bad files)."""
    model = load_model(path)  # warms up and validates: see model_schema
    schema = model_schema(model)
    return ServedModel(name=name, version=version, path=path, model=model, schema=schema,
                       family=str(model.family), metadata_json=_metadata_json(model.metadata))


ChangeListener = Callable[[str, "ModelSnapshot | None"], None]


@dataclass
class ModelRepository:
    """Scans ROOT and publishes one immutable ModelSnapshot per model name.

    `get` is lock-free (a dict read of a dict that is replaced, never mutated); scans are
    serialized by a lock so polling and Reload never load the same file twice at once.
    """

    root: Path
    keep_versions: int = 2
    listeners: list[ChangeListener] = field(default_factory=list)
    loader: Callable[[str, int, Path], ServedModel] = load_served_model
    on_failure: Callable[[str, int, str], None] | None = None  # (name, version, message), once per bad file

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        if self.keep_versions < 1:
            raise InputError(f"--keep-versions must be at least 1, got {self.keep_versions}")
        if not self.root.is_dir():
            raise InputError("model repository root is not a directory (--models)", self.root)
        self._snapshots: dict[str, ModelSnapshot] = {}
        self._scan_lock = threading.Lock()
        self._announce: list[dict] = []  # version_loaded events of the scan under way (held under the lock)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._poller: threading.Thread | None = None

    # -- read side (request path) ------------------------------------------------------
    def get(self, name: str) -> ModelSnapshot:
        snapshot = self._snapshots.get(name)
        if snapshot is None:
            raise UnknownModel(f"no model named {clip(name)} on this server")  # not the others' names
        return snapshot

    def snapshots(self) -> list[ModelSnapshot]:
        current = self._snapshots
        return [current[name] for name in sorted(current)]

    # -- write side (scans) ------------------------------------------------------------
    def scan(self, name: str | None = None) -> list[ModelSnapshot]:
        """Bring the served state in line with the files; returns the scanned snapshots.

        With a name, only that model is scanned (UnknownModel if it has no directory).
        """
        with self._scan_lock:
            if not self.root.is_dir():
                log_event(logging.ERROR, "repository_root_missing", root=str(self.root))
                return self.snapshots()
            self._announce.clear()
            on_disk = model_dirs(self.root)
            if name is not None:
                if name not in on_disk:
                    raise UnknownModel(f"no model directory named {clip(name)} in the repository")
                names = [name]
            else:
                names = sorted(on_disk)
            updated = dict(self._snapshots)
            changed: list[tuple[str, ModelSnapshot | None]] = []
            for model_name in names:
                before = updated.get(model_name)
                announced = len(self._announce)
                try:
                    after = self._scan_one(model_name, on_disk[model_name], before)
                except OSError as exc:  # e.g. the directory vanished mid-scan: next scan decides
                    del self._announce[announced:]  # nothing of this model's scan is published
                    log_event(logging.WARNING, "model_scan_failed", model=model_name, error=str(exc))
                    if before is None:
                        continue
                    after = before
                updated[model_name] = after
                if after is not before:
                    changed.append((model_name, after))
            if name is None:
                for gone in sorted(set(updated) - set(on_disk)):
                    del updated[gone]
                    changed.append((gone, None))
                    log_event(logging.WARNING, "model_removed", model=gone)
            self._snapshots = updated  # the atomic swap: one reference assignment
            for model_name, snapshot in changed:
                for listener in self.listeners:
                    listener(model_name, snapshot)
            for fields in self._announce:  # requests, health and metrics see them now: the log never runs ahead
                log_event(logging.INFO, "version_loaded", **fields)
            self._announce.clear()
            return [updated[n] for n in names if n in updated]

    def _scan_one(self, name: str, name_dir: Path, before: ModelSnapshot | None) -> ModelSnapshot:
        dirs = version_dirs(name_dir)
        old_loaded = dict(before.loaded) if before else {}
        records = {v: r for v, r in (before.records.items() if before else ()) if v in dirs}
        loaded = {v: m for v, m in old_loaded.items() if v in dirs}
        for v in sorted(set(old_loaded) - set(loaded)):
            log_event(logging.WARNING, "version_removed", model=name, version=v)
        schema = before.schema if (before and loaded) else None
        kept: list[int] = []
        for version in sorted(dirs, reverse=True):
            if len(kept) == self.keep_versions:
                break
            if version in loaded:
                kept.append(version)
                if version in records:
                    records[version] = self._check_loaded(name, version, dirs[version], records[version])
                continue
            record, served = self._try_load(name, version, dirs[version], records.get(version), schema)
            records[version] = record
            if served is not None:
                loaded[version] = served
                if schema is None:
                    schema = served.schema
                kept.append(version)
        older = f"older than the newest {self.keep_versions} loadable versions"
        for version in sorted(set(loaded) - set(kept)):
            del loaded[version]
            records[version] = VersionRecord(version, UNLOADED, older)
            log_event(logging.INFO, "version_unloaded", model=name, version=version)
        for version in dirs:
            if version not in records:
                records[version] = VersionRecord(version, UNLOADED, older)
        if not loaded:
            schema = None
        snapshot = ModelSnapshot(name, MappingProxyType(loaded), MappingProxyType(records), schema)
        if before is not None and before.loaded_versions == snapshot.loaded_versions \
                and dict(before.records) == records:
            return before  # nothing changed: keep the identical object
        return snapshot

    def _public(self, exc: BaseException, path: Path | None) -> str:
        """An error as a client may see it: our own errors' reasons without the server's
        paths; anything else only by its type (the log has the rest)."""
        if not isinstance(exc, MosesReorderError):
            return f"could not be loaded ({type(exc).__name__}; see the server log)"
        text = str(exc)
        where = getattr(exc, "path", None)
        if where and text.startswith(f"{where}: "):
            text = text[len(where) + 2:]
        for secret, shown in ((path, "the model file"), (self.root.resolve(), "the repository"),
                              (self.root, "the repository")):
            if secret is not None:
                text = text.replace(str(secret), shown)
        return text or type(exc).__name__

    def _try_load(self, name: str, version: int, version_dir: Path, previous: VersionRecord | None,
                  schema: Schema | None) -> tuple[VersionRecord, ServedModel | None]:
        try:
            path = find_model_file(version_dir)
            signature = _file_signature(path)
        except (InputError, OSError) as exc:
            detail = str(exc)
            if previous is None or previous.detail != detail:
                log_event(logging.ERROR, "version_failed", model=name, version=version, error=detail)
            return VersionRecord(version, FAILED, self._public(exc, None), None, detail), None
        if previous is not None and previous.state == FAILED and previous.signature == signature:
            return previous, None  # the same broken file: do not retry until it changes
        try:
            served = self.loader(name, version, path)
            if schema is not None and served.schema != schema:
                raise InputError(f"schema {served.schema.describe()} differs from the served schema "
                                 f"{schema.describe()}; a name's schema cannot change while it is "
                                 "served (use a new model name)", path)
        except Exception as exc:  # a bad file must never take the server down
            detail = str(exc) or type(exc).__name__
            log_event(logging.ERROR, "version_failed", model=name, version=version, path=str(path),
                      error=detail, error_type=type(exc).__name__)
            if self.on_failure is not None:
                self.on_failure(name, version, detail)
            return VersionRecord(version, FAILED, self._public(exc, path), signature, detail), None
        self._announce.append(dict(model=name, version=version, path=str(path), moses_type=served.schema.moses_type,
                                   family=served.family, sha256=served.model.sha256))
        return VersionRecord(version, LOADED, "", signature), served

    def _check_loaded(self, name: str, version: int, version_dir: Path, record: VersionRecord) -> VersionRecord:
        """A loaded version keeps serving the bytes it validated (they were read into memory
        at load): a file changed or removed under it afterwards is reported, never loaded."""
        try:
            now = _file_signature(find_model_file(version_dir))
        except (InputError, OSError):
            now = None
        if now == record.signature:
            return record if not record.message else VersionRecord(version, LOADED, "", record.signature)
        message = ("the model file changed on disk after this version was loaded; still serving the "
                   "version loaded (versions are immutable: publish a change as a new version)")
        if record.message != message:
            log_event(logging.WARNING, "loaded_file_changed", model=name, version=version,
                      path=str(version_dir), loaded=record.signature, now=now,
                      why="serving the copy validated at load; publish changes as a new version directory")
        return VersionRecord(version, LOADED, message, record.signature)

    # -- background scans ----------------------------------------------------------------
    def start_polling(self, seconds: float) -> None:
        """Scan every `seconds` (0 = only when `request_scan` is called) on a daemon thread."""
        if self._poller is not None:
            return

        def poll() -> None:
            while not self._stop.is_set():
                woken = self._wake.wait(seconds if seconds > 0 else None)
                if self._stop.is_set():
                    return
                self._wake.clear()
                try:
                    self.scan()
                except Exception as exc:  # keep polling whatever one scan hit
                    log_event(logging.ERROR, "scan_failed", error=str(exc), requested=woken, exc_info=True)

        self._poller = threading.Thread(target=poll, name="model-poller", daemon=True)
        self._poller.start()

    def request_scan(self) -> None:
        """Ask the background thread for a scan now (signal-handler safe: sets an event)."""
        self._wake.set()

    def stop_polling(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._poller is not None:
            self._poller.join(timeout=5)
            self._poller = None
