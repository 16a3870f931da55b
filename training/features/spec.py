"""Feature settings: which templates, how much source context, which ANOVA degree.

A `FeatureSpec` is what a weight file records so the server extracts exactly the
features the model was trained on. It names the SVM paper's sets S1..S15 (Table 2) or a
free combination such as `alignments,context=1,anova=2`. This module only parses and
prints settings; the extraction itself is in training/features/templates.py.

Template tags are hashed here once (`template_tags`); their strings are part of the
hash scheme: changing one invalidates every weight file, like training/features/hashing.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from training.errors import InputError, UsageError
from training.features.hashing import hash_string

NEIGHBOUR_KINDS = ("", "words")  # training/features/neighbour.py builds them

TEMPLATES = ("words", "boundaries", "alignments", "pair", "source")
ANOVA_DEGREES = ("1", "2", "le2")
MAX_CONTEXT = 3

# Table 2 of the SVM paper: (phrase template, context size, ANOVA degree).
_TABLE2 = {
    "S1": ("words", 0, "1"),
    "S2": ("boundaries", 0, "1"),
    "S3": ("alignments", 0, "1"),
    "S4": ("boundaries", 1, "1"),
    "S5": ("boundaries", 1, "2"),
    "S6": ("boundaries", 1, "le2"),
    "S7": ("alignments", 1, "1"),
    "S8": ("alignments", 1, "2"),
    "S9": ("alignments", 1, "le2"),
    "S10": ("boundaries", 3, "1"),
    "S11": ("boundaries", 3, "2"),
    "S12": ("boundaries", 3, "le2"),
    "S13": ("alignments", 3, "1"),
    "S14": ("alignments", 3, "2"),
    "S15": ("alignments", 3, "le2"),
}


@dataclass(frozen=True)
class FeatureSpec:
    """Templates (a subset of TEMPLATES), source context size, ANOVA degree, and the
    decoder's context: `neighbour` features of the phrase placed next to the pair
    (training/features/neighbour.py; "" none), which stay out of the ANOVA pairs."""

    templates: tuple[str, ...]
    context: int = 0
    anova: str = "1"
    neighbour: str = ""

    def __post_init__(self) -> None:
        unknown = [t for t in self.templates if t not in TEMPLATES]
        if unknown:
            raise UsageError(f"feature spec: unknown template {unknown[0]!r} (expected one of {', '.join(TEMPLATES)})")
        if not self.templates and self.context == 0:
            raise UsageError("feature spec: no template and no context gives no features")
        if not 0 <= self.context <= MAX_CONTEXT:
            raise UsageError(f"feature spec: context={self.context} (expected 0..{MAX_CONTEXT})")
        if self.anova not in ANOVA_DEGREES:
            raise UsageError(f"feature spec: anova={self.anova!r} (expected 1, 2 or le2)")
        if self.neighbour not in NEIGHBOUR_KINDS:
            raise UsageError(f"feature spec: neighbour={self.neighbour!r} (expected "
                             f"{' or '.join(k for k in NEIGHBOUR_KINDS if k)})")
        # Canonical template order, so equal specs print equally.
        object.__setattr__(self, "templates", tuple(t for t in TEMPLATES if t in self.templates))

    @classmethod
    def parse(cls, text: str) -> "FeatureSpec":
        """`S7`, or comma-separated items: templates, `context=N`, `anova=1|2|le2`,
        `neighbour` (= `neighbour=words`).

        A named set may start the list and later items add templates or override
        settings (e.g. `S7,pair`, `S6,neighbour`).
        """
        templates: list[str] = []
        context, anova, neighbour = 0, "1", ""
        items = [item.strip() for item in str(text).split(",") if item.strip()]
        if not items:
            raise UsageError("feature spec is empty (expected e.g. S7 or alignments,context=1)")
        for item in items:
            named = _TABLE2.get(item.upper())
            if named is not None:
                templates.append(named[0])
                context, anova = named[1], named[2]
            elif item in TEMPLATES:
                templates.append(item)
            elif item.startswith("context="):
                value = item.partition("=")[2]
                if not value.isdigit():
                    raise UsageError(f"feature spec {text!r}: {item!r} needs a number")
                context = int(value)
            elif item == "neighbour" or item.startswith("neighbour="):
                neighbour = item.partition("=")[2] or "words"
            elif item.startswith("anova="):
                anova = {"<=2": "le2", "1|2": "le2"}.get(item.partition("=")[2], item.partition("=")[2])
            else:
                raise UsageError(f"feature spec {text!r}: unknown item {item!r} "
                                 f"(expected S1..S15, {', '.join(TEMPLATES)}, context=N, anova=1|2|le2, "
                                 "neighbour)")
        return cls(tuple(dict.fromkeys(templates)), context, anova, neighbour)

    @property
    def name(self) -> str:
        """The Table 2 name if there is one, else the canonical combination; then the
        neighbour features, if any (`S6,neighbour`)."""
        extra = "" if not self.neighbour else ",neighbour" if self.neighbour == "words" \
            else f",neighbour={self.neighbour}"
        for name, (template, context, anova) in _TABLE2.items():
            if self.templates == (template,) and self.context == context and self.anova == anova:
                return name + extra
        return ",".join([*self.templates, f"context={self.context}", f"anova={self.anova}"]) + extra

    @property
    def pair_spec(self) -> "FeatureSpec":
        """The features of the pair alone (phi): this spec without the neighbour's."""
        return FeatureSpec(self.templates, self.context, self.anova)

    def __str__(self) -> str:
        return self.name

    @property
    def anova_low(self) -> int:
        return 2 if self.anova == "2" else 1

    @property
    def anova_high(self) -> int:
        return 1 if self.anova == "1" else 2


NAMED_SPECS: dict[str, FeatureSpec] = {name: FeatureSpec.parse(name) for name in _TABLE2}

# Template tags. Index constants are shared with the numba kernels in features.py.
TAG_SRC_WORD, TAG_TGT_WORD = 0, 1
TAG_SRC_FIRST, TAG_SRC_LAST, TAG_TGT_FIRST, TAG_TGT_LAST = 2, 3, 4, 5
TAG_ALIGN, TAG_PAIR, TAG_ANOVA2, TAG_BOS, TAG_EOS = 6, 7, 8, 9, 10
TAG_CONTEXT_LEFT = 11                     # + (k-1): the word k before the span
TAG_CONTEXT_RIGHT = TAG_CONTEXT_LEFT + MAX_CONTEXT  # + (k-1): the word k after the span
TAG_SOURCE = TAG_CONTEXT_RIGHT + MAX_CONTEXT       # added last: earlier tags keep their hashes
_TAG_NAMES = (
    ["src", "tgt", "src.first", "src.last", "tgt.first", "tgt.last", "align", "pair", "anova2",
     "<s>", "</s>"]
    + [f"ctx-{k}" for k in range(1, MAX_CONTEXT + 1)]
    + [f"ctx+{k}" for k in range(1, MAX_CONTEXT + 1)]
    + ["source"]
)


def tag_string(index: int) -> str:
    """The string hashed for a tag. `<s>`/`</s>` are the padding tokens, not tags."""
    name = _TAG_NAMES[index]
    return name if index in (TAG_BOS, TAG_EOS) else "feature-template/v1/" + name


TAG_NAMES: tuple[str, ...] = tuple(_TAG_NAMES)
_TAGS = np.array([int(hash_string(tag_string(i))) for i in range(len(_TAG_NAMES))], dtype=np.uint64)
_TAGS.setflags(write=False)


def template_tags() -> np.ndarray:
    """uint64 hashes of every template tag (and the <s>/</s> padding tokens)."""
    return _TAGS
