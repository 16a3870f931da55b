"""PNG figures of the papers, drawn with matplotlib's Agg backend (no display needed).

- training time and memory against data size (SVM paper, Figure 2), from benchmark records
- NMI of every feature, ranked from lowest to highest (Bayesian paper, Figure 1)
- error rate against the proportion of features kept by NMI (Bayesian paper, Figure 2)

Each function takes plain data and a path and writes one PNG atomically; nothing here
trains, reads stores or loads models.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def save_png(fig: Any, path: str | os.PathLike) -> Path:
    """PNG bytes written atomically (training.atomic), the figure closed either way."""
    import io

    from training.atomic import write_bytes_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        write_bytes_atomic(path, buf.getvalue())
    finally:
        plt.close(fig)
    return path


def plot_scaling(records: Sequence[Mapping[str, Any]], path: str | os.PathLike) -> Path:
    """Records {family, examples, seconds, peak_mb}: time (top) and memory (bottom)."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6, 6), sharex=True)
    families = sorted({r["family"] for r in records})
    for family in families:
        rows = sorted((r for r in records if r["family"] == family), key=lambda r: r["examples"])
        x = [r["examples"] for r in rows]
        top.plot(x, [r["seconds"] for r in rows], marker="o", label=family)
        bottom.plot(x, [r["peak_mb"] for r in rows], marker="o", label=family)
    top.set_ylabel("training time (s)")
    bottom.set_ylabel("peak memory (MB)")
    bottom.set_xlabel("phrase pairs")
    top.set_title("Training time and memory against data size")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save_png(fig, path)


def plot_nmi_ranking(nmi: np.ndarray, path: str | os.PathLike) -> Path:
    """Bayesian paper Figure 1: NMI of all features ranked, rank 0 the most informative (the
    order --select-nmi keeps them in)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    ranked = np.sort(np.asarray(nmi))[::-1]
    ax.plot(np.arange(ranked.size), ranked, lw=1)
    ax.set_xlabel("feature rank (0 = highest NMI)")
    ax.set_ylabel("normalised mutual information")
    ax.set_yscale("log" if ranked.size and ranked.max() > 0 else "linear")
    ax.set_title(f"NMI of {ranked.size:,} features")
    ax.grid(alpha=0.3)
    return save_png(fig, path)


def plot_selection_error(kept_fraction: Sequence[float], error: Sequence[float], path: str | os.PathLike,
                         label: str = "") -> Path:
    """Bayesian paper Figure 2: error rate against the proportion of features kept."""
    fig, ax = plt.subplots(figsize=(6, 4))
    order = np.argsort(kept_fraction)
    ax.plot(np.asarray(kept_fraction)[order] * 100, np.asarray(error)[order] * 100, marker="o", label=label)
    ax.set_xlabel("features kept by NMI (%)")
    ax.set_ylabel("error rate (%)")
    ax.set_title("Error against feature selection")
    if label:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return save_png(fig, path)
