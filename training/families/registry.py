"""The family registry: name -> class, filled by `@register` as each family module loads.

It imports no family, so a family (the hybrid, which builds a base classifier by
name) can look others up without an import cycle; `training.families` imports every
family module, so importing the package fills the registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from training.errors import InputError, UsageError

if TYPE_CHECKING:
    from training.families.base import ReorderingClassifier

FAMILIES: dict[str, type["ReorderingClassifier"]] = {}
C = TypeVar("C")


def register(cls: C) -> C:
    """Class decorator: make a family available under its `family` name."""
    name = cls.family  # type: ignore[attr-defined]
    if name in FAMILIES and FAMILIES[name] is not cls:
        raise ValueError(f"family {name!r} registered twice")
    FAMILIES[name] = cls  # type: ignore[assignment]
    return cls


def get_family(name: str) -> type["ReorderingClassifier"]:
    """The family class called `name`; InputError listing the known ones otherwise."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise UsageError(f"unknown family {name!r} (known: {', '.join(sorted(FAMILIES))})") from None
