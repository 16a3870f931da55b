"""The moses.ini [feature] line of a reordering feature: the one place it is written.

`pipeline` prints it, the benchmarks decode with it, and the docs show it
(tests/docs/test_docs_refs.py rebuilds every line they show). Moses's LexicalReordering
and our ExternalReordering read the same keys, so one builder serves both, and it writes
what Moses reads (moses/FF/LexicalReordering/ in the Moses tree):

- num-features is LRModel::GetNumScoreComponents: one score per class and direction, one
  per direction for collapseff; twice that for an ExternalReordering with path=, whose
  row is the table's block and then the model's (Moses2, moses_ff/moses2).
- output-factor only for `-fe` types. With it set, LexicalReorderingTableMemory reads a
  target field from every table line, and an `-f` table's `f ||| scores` line has none
  (Moses stops with std::out_of_range); the binarised table adds a target part to the key
  it looks up, so an `-f` row is never found. ExternalReordering reads the target words
  with output-factor 0 either way.
- Moses refuses a key given twice (FeatureFunction::ParseLine), and so does this.
"""

from __future__ import annotations

from training.moses.types import MosesType

FEATURES = ("ExternalReordering", "LexicalReordering")
# Keys the builder writes itself, from the type.
OWN_KEYS = ("name", "num-features", "type", "input-factor", "output-factor")


def n_scores(moses_type: str | MosesType) -> int:
    """Moses's score count for a type (LRModel::GetNumScoreComponents)."""
    t = moses_type if isinstance(moses_type, MosesType) else MosesType.parse(moses_type)
    return len(t.directions) * (1 if t.collapse else len(t.classes))


def feature_line(moses_type: str | MosesType, feature: str = "ExternalReordering", *,
                 name: str = "LexicalReordering0", num_features: int | None = None, **keys: object) -> str:
    """`FEATURE name=NAME num-features=N type=TYPE input-factor=0 [output-factor=0] KEY=VALUE...`.

    `moses_type` is written as given (Moses takes every spelling); `keys` follow in their
    order, an underscore in a name written as a dash (default_scores= -> default-scores=),
    None values left out. `num_features` overrides the count (e.g. a table whose rows are
    wider than the type, which Moses would refuse: for tests of that refusal)."""
    if feature not in FEATURES:
        raise ValueError(f"feature {feature!r}: expected one of {', '.join(FEATURES)}")
    t = moses_type if isinstance(moses_type, MosesType) else MosesType.parse(moses_type)
    extra = {key.replace("_", "-"): value for key, value in keys.items() if value is not None}
    clash = sorted(set(extra) & set(OWN_KEYS))
    if clash:
        raise ValueError(f"{', '.join(clash)}: written by feature_line itself")
    if num_features is None:
        num_features = n_scores(t) * (2 if feature == "ExternalReordering" and "path" in extra else 1)
    parts = [feature, f"name={name}", f"num-features={num_features}", f"type={moses_type}", "input-factor=0"]
    if t.language == "fe":
        parts.append("output-factor=0")
    return " ".join(parts + [f"{key}={value}" for key, value in extra.items()])


def parse_feature_line(line: str) -> tuple[str, dict[str, str]]:
    """(feature, {key: value}) of a [feature] line, refusing a key given twice as Moses does."""
    feature, *fields = line.split()
    keys: dict[str, str] = {}
    for field in fields:
        key, sep, value = field.partition("=")
        if not sep:
            raise ValueError(f"{field!r}: expected KEY=VALUE (Moses: incorrect format for feature function arg)")
        if key in keys:
            raise ValueError(f"duplicate key {key!r} in line (Moses refuses it)")
        keys[key] = value
    return feature, keys
