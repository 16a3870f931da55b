"""Model families: one module each, registered by name (registry.py) as it is imported.

The imports below fill the registry in the order `pipeline` trains the families.
"""

# isort: off
from training.families import svm, dual_mlr, maxent, naive_bayes, lexical, hybrid  # noqa: F401  (they register)
# isort: on
from training.families.base import ReorderingClassifier
from training.families.registry import FAMILIES, get_family, register

__all__ = ["FAMILIES", "ReorderingClassifier", "get_family", "register"]
