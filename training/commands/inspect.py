"""`moses-reorder inspect MODEL`: what a weight file is, how it was made and how big it is.

Read-only; it loads the file exactly as the server does, so a file that inspects cleanly
also loads in the server.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from training.modelfile.model import load_model


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def _num(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def training_lines(training: dict[str, Any]) -> list[str]:
    """The training record in a few lines: the split, time and memory, then per direction
    passes, convergence, final objective, temperature and calibration log-loss. The full
    record (every pass) is what `inspect --json` prints."""
    ex = training.get("examples") or {}
    lines = [f"training      {_num(ex.get('fit'), ',')} fit / {_num(ex.get('calibration'), ',')} calibration / "
             f"{_num(ex.get('heldout'), ',')} held-out examples (held-out fraction "
             f"{_num(training.get('heldout_fraction'), 'g')})",
             f"  time        {_num(training.get('train_seconds'), '.1f')} s to fit and calibrate "
             f"(the report's Time; features {_num(training.get('feature_seconds'), '.1f')} s; numba compiling "
             f"{_num(training.get('compile_seconds'), '.1f')} s more)",
             f"  memory      peak {_num((training.get('peak_memory_bytes') or 0) / 2**20, '.0f')} MiB, "
             f"BLAS threads {_num(training.get('blas_threads'), 'd')}"]
    selection = training.get("selection")
    if selection:
        lines.append(f"  selection   {selection.get('rule')}: kept {selection.get('kept')} of {selection.get('of')}")
    for direction, info in (training.get("directions") or {}).items():
        history = info.get("history") or []
        summary = info.get("summary") or {}
        cal = info.get("calibration") or {}
        converged = summary.get("converged")
        objective = history[-1].get("objective") if history else summary.get("objective")
        parts = [f"{len(history)} passes",
                 "converged " + ("-" if converged is None else "yes" if converged else "NO"),
                 f"final objective {_num(objective, '.6g')}",
                 f"temperature {_num(summary.get('temperature'), '.4g')}",
                 "calibration log-loss " + (f"{_num(cal.get('log_loss_before'), '.4f')} -> "
                                            f"{_num(cal.get('log_loss'), '.4f')}" if cal else "- (none)"),
                 f"{_num(info.get('fit_seconds'), '.1f')} s"]
        lines.append(f"  {direction:<12}" + ", ".join(parts))
    lines.append("  (every pass and setting: inspect --json)")
    return lines


def run(args: argparse.Namespace) -> int:
    model = load_model(args.model)
    summary = model.summary()
    if args.json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
        return 0
    meta = model.metadata
    lines = [
        f"file          {model.path}",
        f"size          {model.file_size} bytes ({_size(model.file_size)}), format {model.format_version}, "
        f"sha256 {model.sha256}",
        f"family        {model.family} (link {model.link_name}, trainer {meta['trainer']})",
        f"moses type    {model.moses_type}",
        f"classes       {', '.join(model.classes)}",
        f"directions    {', '.join(model.directions)}",
        f"outputs       {', '.join(model.outputs)}",
        f"features      {model.spec.name} (threshold {meta['threshold']}, hash {meta['hash_scheme']})",
        f"n_features    {model.n_features}",
        f"weights       {meta['weights_dtype']}",
        "arrays",
    ]
    for name, info in summary["arrays"].items():
        lines.append(f"  {name:<12}{info['dtype']:<9}{'x'.join(map(str, info['shape'])) or 'scalar':<16}"
                     f"{_size(info['nbytes'])}")
    lines.append(f"index         {_size(model.index_nbytes)} in memory when loaded")
    lines.append("metadata")
    shown = {"family", "link", "trainer", "moses_type", "classes", "directions", "outputs", "features",
             "threshold", "hash_scheme", "n_features", "weights_dtype"}
    for key in sorted(meta):
        if key not in shown and key != "training":
            lines.append(f"  {key:<20}{json.dumps(meta[key], ensure_ascii=False)}")
    if isinstance(meta.get("training"), dict):
        lines += training_lines(meta["training"])
    print("\n".join(lines))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "inspect",
        description="Load a weight file as the server does (checksum, schema checks) and print its "
                    "metadata, classes, outputs, feature count and array sizes. Exit codes: 0 ok, 4 bad file.")
    p.add_argument("model", help="weight file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)
