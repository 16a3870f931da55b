"""Figure 1 of both dual papers: active-set fraction and objective per pass, as a PNG.

Input is the `history_` a family records while fitting (one dict per pass); output is
one PNG with two panels. Drawing only: this module must not train or read stores.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from training.eval.plots import plt, save_png


def plot_history(histories: Mapping[str, Sequence[Mapping]], path: str | os.PathLike,
                 title: str = "") -> None:
    """One line per named history (e.g. a direction); left: active fraction, right: objective."""
    fig, (ax_active, ax_obj) = plt.subplots(1, 2, figsize=(10, 4))
    for name, history in histories.items():
        passes = [h["pass"] for h in history]
        ax_active.plot(passes, [h.get("active", 1.0) for h in history], marker=".", label=name)
        ax_obj.plot(passes, [h["objective"] for h in history], marker=".", label=name)
    ax_active.set_xlabel("pass")
    ax_active.set_ylabel("active examples (fraction)")
    ax_active.set_ylim(0.0, 1.05)
    ax_active.grid(True, alpha=0.3)
    ax_obj.set_xlabel("pass")
    ax_obj.set_ylabel("objective")
    ax_obj.grid(True, alpha=0.3)
    ax_active.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    save_png(fig, path)
