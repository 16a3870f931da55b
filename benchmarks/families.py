"""Figures for issue 5: families x feature sets on held-out ja-en, NMI selection, NB vs lexical time.

    PYTHONPATH=. nice -n 10 python benchmarks/families.py --store STORE --work DIR \
        [--plan cheap|full] [--type wbe-msd-backward-fe]

STORE is an example store of the 50k ja-en corpus with wbe-msd labels
(`moses-reorder extract --model wbe-msd`). Prints Markdown (the SVM paper's Tables 5-6
layout plus log-loss and the seen/unseen slices) and writes DIR/families.json after
every model, so an interrupted run keeps what it measured. Timings are single runs on
a shared 2-core machine: compare ratios from the same run, not absolute seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from training.moses.table import count_pairs
from training.moses.types import MosesType
from training.eval.report import study_table
from training.store.examples import ExampleStore
from training.eval.studies import run_experiment, selection_curve
from training.api.train import train_model
from training.eval.evaluate import evaluate

PLANS = {
    # (families, feature sets) in the order they run: cheap and decisive first.
    "cheap": [(["lexical"], [None]), (["nb-map", "nb-bayes"], ["S2", "S4", "S6", "S7", "S9"])],
    "full": [(["lexical"], [None]), (["nb-map", "nb-bayes"], ["S2", "S4", "S6", "S7", "S9"]),
             (["maxent"], ["S7"]), (["hybrid"], [None]), (["maxent"], ["S4", "S2", "S6", "S9"])],
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--plan", choices=sorted(PLANS), default="full")
    ap.add_argument("--type", default="wbe-msd-backward-fe")
    ap.add_argument("--skip-study", action="store_true", help="only selection and timing")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    out = work / "families.json"
    results = json.loads(out.read_text()) if out.exists() else {}
    mtype = MosesType.parse(args.type)

    def save() -> None:
        out.write_text(json.dumps(results, indent=1, default=float))

    # 1. NB training time next to lexical counting (the Bayesian paper: "as fast").
    store = ExampleStore.open(args.store)
    t = time.perf_counter()
    count_pairs(store, mtype)
    results["lexical_count_seconds"] = time.perf_counter() - t
    print(f"lexical counting (count_pairs, whole store): {results['lexical_count_seconds']:.2f} s", flush=True)

    # 2. NMI selection: half the features (Bayesian paper section 6.1).
    sel = results.setdefault("selection", {})
    for family in ("nb-map", "nb-bayes"):
        for rule in (None, "0.5"):
            name = f"{family}-S7-{rule or 'all'}"
            if name in sel:
                continue
            path = work / "models" / f"{name}.mrw"
            path.parent.mkdir(parents=True, exist_ok=True)
            meta = train_model(args.store, family=family, moses_type=args.type, features="S7", out=path,
                               select_nmi=rule)
            rep = evaluate(path, args.store)["directions"][mtype.directions[0]]
            sel[name] = {"accuracy": rep["all"]["accuracy"], "log_loss": rep["all"]["log_loss"],
                         "features": (meta["training"]["selection"] or {}).get("kept"),
                         "fit_seconds": meta["training"]["directions"][mtype.directions[0]]["fit_seconds"]}
            print(f"selection {name}: acc {sel[name]['accuracy']:.4f} log-loss {sel[name]['log_loss']:.4f} "
                  f"features {sel[name]['features']} fit {sel[name]['fit_seconds']:.2f} s", flush=True)
            save()
    if "curve" not in results:
        curve = selection_curve(args.store, "S7", args.type)
        results["curve"] = curve["points"]
        np.save(work / "nmi-S7.npy", curve["nmi"])
        save()
    for p in results["curve"]:
        print(f"curve S7 nb-map keep {p['fraction']:.2f} ({p['kept']} features, NMI >= {p['min_nmi']:.2e}): "
              f"error {p['error']:.4f}", flush=True)

    # 3. The study: families x feature sets.
    rows = results.setdefault("rows", [])
    done = {(r["family"], r["features"]) for r in rows}
    if not args.skip_study:
        for families, feature_sets in PLANS[args.plan]:
            for family in families:
                for features in feature_sets:
                    from training.families import FAMILIES
                    from training.features.spec import FeatureSpec

                    own = getattr(FAMILIES[family], "default_features", None)
                    key = (family, FeatureSpec.parse(features or own).name)
                    if key in done:
                        continue
                    new = run_experiment(args.store, work / "models", families=[family],
                                         feature_sets=[features] if features else [],
                                         moses_type=args.type,
                                         log=lambda line: print(line, flush=True))
                    rows.extend(new)
                    done.add(key)
                    save()
    print()
    print(study_table(rows, list(mtype.classes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
