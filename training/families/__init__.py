"""Model families: one module each, registered in FAMILIES by name."""

from training.families.dual_mlr import DualMLR
from training.families.maxent import MaxEnt
from training.families.svm import MulticlassSVM

FAMILIES = {
    "svm": MulticlassSVM,
    "dual-mlr": DualMLR,
    "maxent": MaxEnt,
}
