"""Model families: one module each, registered in FAMILIES by name."""

from training.families.dual_mlr import DualMLR
from training.families.hybrid import HybridBackoff
from training.families.lexical import LexicalTable
from training.families.maxent import MaxEnt
from training.families.naive_bayes import MultinomialNBBayes, MultinomialNBMap
from training.families.svm import MulticlassSVM

FAMILIES = {
    "svm": MulticlassSVM,
    "dual-mlr": DualMLR,
    "maxent": MaxEnt,
    "nb-map": MultinomialNBMap,
    "nb-bayes": MultinomialNBBayes,
    "lexical": LexicalTable,
    "hybrid": HybridBackoff,
}
