"""Moses reordering type strings, e.g. `hier-msd-bidirectional-fe`, and what they imply.

A model file serves exactly one type string. The type fixes the orientation kind used
at extraction (wbe/phrase/hier), the class set and its column order, the directions
(backward block first) and whether the lexical table is keyed by f or by f and e.
Orders and names follow Moses (MOSES-NOTES.md sections 2-3) so a row of probabilities
drops straight into Moses's score vector.
"""

from __future__ import annotations

from dataclasses import dataclass

from training.errors import InputError, UsageError

KINDS = ("wbe", "phrase", "hier")
# Moses's column order per orientation set.
CLASSES: dict[str, tuple[str, ...]] = {
    "msd": ("mono", "swap", "disc"),
    "mslr": ("mono", "swap", "dleft", "dright"),
    "monotonicity": ("mono", "nonmono"),
    "leftright": ("right", "left"),
}
# Orientation set -> the `extract --model` orientation that produces its labels.
EXTRACT_ORIENTATION = {"msd": "msd", "mslr": "mslr", "monotonicity": "mono", "leftright": "mslr"}
# Labels of an extraction model, in the store's integer coding.
EXTRACT_CLASSES: dict[str, tuple[str, ...]] = {
    "msd": ("mono", "swap", "other"),
    "mslr": ("mono", "swap", "dleft", "dright"),
    "mono": ("mono", "nomono"),
}
DIRECTIONS = {"backward": ("backward",), "forward": ("forward",), "bidirectional": ("backward", "forward")}
# Store label columns use extraction vocabulary: prev (backward) and next (forward).
STORE_DIRECTION = {"backward": "prev", "forward": "next"}


@dataclass(frozen=True)
class MosesType:
    kind: str            # wbe | phrase | hier
    orientation: str     # msd | mslr | monotonicity | leftright
    direction: str       # backward | forward | bidirectional
    language: str        # f | fe
    collapse: bool = False

    @classmethod
    def parse(cls, text: str) -> "MosesType":
        """Parse like Moses's LRModel: dash-separated tokens in any order (empty ones skipped,
        the last of each group wins), kind defaults to wbe, direction to backward
        (`unidirectional` is its old name). moses_ff/moses/ReorderingType.h is the C++ twin."""
        kind, orientation, direction, language, collapse = "wbe", None, "backward", None, False
        for token in text.strip().split("-"):
            if not token:
                continue
            if token == "unidirectional":
                direction = "backward"
            elif token in KINDS:
                kind = token
            elif token in CLASSES:
                orientation = token
            elif token in DIRECTIONS:
                direction = token
            elif token in ("f", "fe"):
                language = token
            elif token in ("collapseff", "allff"):
                collapse = token == "collapseff"
            elif token == "mono":
                orientation = "monotonicity"
            else:
                raise UsageError(f"reordering type {text!r}: unknown part {token!r} "
                                 "(expected e.g. hier-msd-bidirectional-fe)")
        if orientation is None or language is None:
            raise UsageError(f"reordering type {text!r} must name an orientation set "
                             "(msd, mslr, monotonicity, leftright) and a language (f or fe)")
        return cls(kind, orientation, direction, language, collapse)

    def __str__(self) -> str:
        text = f"{self.kind}-{self.orientation}-{self.direction}-{self.language}"
        return text + ("-collapseff" if self.collapse else "")

    @property
    def extract_model(self) -> str:
        """The `extract --model` name whose labels this type needs, e.g. hier-msd."""
        return f"{self.kind}-{EXTRACT_ORIENTATION[self.orientation]}"

    @property
    def classes(self) -> tuple[str, ...]:
        return CLASSES[self.orientation]

    @property
    def directions(self) -> tuple[str, ...]:
        return DIRECTIONS[self.direction]

    @property
    def outputs(self) -> tuple[str, ...]:
        """Output column names, Moses's order: backward block first."""
        return tuple(f"{d}.{c}" for d in self.directions for c in self.classes)

    def store_columns(self) -> tuple[str, ...]:
        """Label columns of the example store this type trains on, one per direction."""
        return tuple(f"{self.extract_model}/{STORE_DIRECTION[d]}" for d in self.directions)


# Store labels of one extraction orientation -> a type's class indices, the own column
# first: Moses's scorer folds classes the same way (score.cpp). None = same coding.
_FOLDS: dict[tuple[str, str], tuple[int, ...] | None] = {
    ("msd", "msd"): None,
    ("mslr", "mslr"): None,
    ("mono", "monotonicity"): None,
    ("mslr", "leftright"): (0, 1, 1, 0),       # right = mono + dright, left = swap + dleft
    ("mslr", "msd"): (0, 1, 2, 2),             # dleft, dright -> disc
    ("msd", "monotonicity"): (0, 1, 1),
    ("mslr", "monotonicity"): (0, 1, 1, 1),
}


def label_source(store, moses_type: MosesType, direction: str):
    """(store label column index, fold or None) giving one direction's labels of `moses_type`:
    the type's own extraction column, or a richer one of the same kind folded (mslr -> msd,
    msd/mslr -> monotonicity); InputError naming the store if it has neither. A chunk's
    labels are then `fold[chunk.labels[:, column]]`."""
    import numpy as np

    suffix = STORE_DIRECTION[direction]
    for (extracted, orientation), fold in _FOLDS.items():
        column = f"{moses_type.kind}-{extracted}/{suffix}"
        if orientation == moses_type.orientation and column in store.label_columns:
            return store.column_index(column), None if fold is None else np.asarray(fold, dtype=np.int8)
    raise InputError(f"store has no labels for {moses_type} (needs column "
                     f"{moses_type.extract_model}/{suffix}; it has {', '.join(store.label_columns)}); "
                     f"extract with --model {moses_type.extract_model}", store.path)


def class_labels(store, moses_type: MosesType, direction: str, chunk_labels=None):
    """One direction's labels in the type's class coding (int8): of every store example, or
    with `chunk_labels` (a StoreChunk's raw `labels` [m, columns]) of those examples only."""
    column, fold = label_source(store, moses_type, direction)
    labels = (store.load_labels(list(store.label_columns)[column]) if chunk_labels is None
              else chunk_labels[:, column])
    return labels if fold is None else fold[labels]
