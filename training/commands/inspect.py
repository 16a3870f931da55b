"""`moses-reorder inspect MODEL`: what a weight file is, how it was made and how big it is.

Read-only; it loads the file exactly as the server does, so a file that inspects cleanly
also loads in the server.
"""

from __future__ import annotations

import argparse
import json

from training.modelfile.model import load_model


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


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
        if key not in shown:
            lines.append(f"  {key:<20}{json.dumps(meta[key], ensure_ascii=False)}")
    print("\n".join(lines))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "inspect", help="print a weight file's metadata, schema and sizes",
        description="Load a weight file as the server does (checksum, schema checks) and print its "
                    "metadata, classes, outputs, feature count and array sizes. Exit codes: 0 ok, 4 bad file.")
    p.add_argument("model", help="weight file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)
