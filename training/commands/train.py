"""`moses-reorder train`: example store -> one weight file for one Moses type string.

Argument parsing only; the work and every default are training.api.train_model's.
Hyper-parameters go to the family by name: --C, --eps, --max-passes, and any other as
--param NAME=VALUE.
"""

from __future__ import annotations

import argparse
import time

from training import defaults
from training.commands.argtypes import add_parallel_arguments, hyperparameter, whole_number
from training.errors import InputError
from training.families import FAMILIES


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train",
        description="Train one classifier per direction of --type on an example store and "
                    "write them into one weight file (outputs in Moses's column order). "
                    "The last --heldout-fraction of sentences is left out for `eval`; the last "
                    "--calibration-fraction of the rest calibrates probabilities. "
                    "Exit codes: 0 ok, 2 usage, 3 bad input.")
    p.add_argument("--family", required=True, choices=sorted(FAMILIES), help="model family")
    p.add_argument("--features", help="feature set: S1..S15 or e.g. alignments,context=1,anova=2 "
                   "(required unless the family has its own, e.g. lexical: pair)")
    p.add_argument("--type", required=True, dest="moses_type",
                   help="Moses reordering type the model serves, e.g. hier-msd-bidirectional-fe")
    p.add_argument("--store", required=True, help="example store made by `moses-reorder extract`")
    p.add_argument("--out", required=True, help="weight file to write (atomically)")
    p.add_argument("--C", type=float, help="regularisation: SVM penalty C, or sigma^2 for dual-mlr/maxent")
    p.add_argument("--eps", type=float, help="stopping / shrinking tolerance (svm, dual-mlr)")
    p.add_argument("--max-passes", type=int, help="maximum passes (iterations for maxent)")
    p.add_argument("--param", action="append", type=hyperparameter, default=[], metavar="NAME=VALUE",
                   help="any other family hyper-parameter, e.g. solver=owlqn; repeatable")
    p.add_argument("--seed", type=int, default=defaults.SEED,
                   help="random seed (visiting order); default %(default)s")
    p.add_argument("--threshold", type=int,
                   help="keep features seen more than this many times in training (default: the "
                        f"family's, else {defaults.THRESHOLD} as in the papers)")
    p.add_argument("--heldout-fraction", type=float, default=defaults.HELDOUT_FRACTION,
                   help="last fraction of sentences left out for evaluation (default %(default)s; "
                        "0 trains a model for decoding on every sentence)")
    p.add_argument("--calibration-fraction", type=float,
                   help="last fraction of the training sentences used to calibrate probabilities "
                        f"(default {defaults.CALIBRATION_FRACTION}, or the family's: 0 for lexical; 0 = none)")
    p.add_argument("--select-nmi", metavar="RULE",
                   help="keep features by normalised mutual information with the class (Bayesian "
                        "paper eqs. 14-16): a fraction such as 0.5, top-k:N, or threshold:T")
    p.add_argument("--plot", help="write the per-pass active-set/objective figure to this PNG")
    p.add_argument("--float16", action="store_true", help="store weights as float16")
    p.add_argument("--blas-threads", type=whole_number(0), default=defaults.BLAS_THREADS, metavar="N",
                   help="BLAS threads while fitting (default %(default)s: more only spin in the solvers' "
                        "small vector algebra, and are much slower on a busy machine); 0 = the BLAS "
                        "library's own setting")
    add_parallel_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress bars or summary")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from training.api import train_model

    given = {name: value for name, value in (("C", args.C), ("eps", args.eps),
                                             ("max_passes", args.max_passes)) if value is not None}
    for name, value in args.param:
        if name in given:
            raise InputError(f"hyper-parameter {name} given twice")
        given[name] = value
    start = time.perf_counter()
    meta = train_model(args.store, family=args.family, moses_type=args.moses_type, features=args.features,
                       out=args.out, threshold=args.threshold, heldout_fraction=args.heldout_fraction,
                       calibration_fraction=args.calibration_fraction, params=given, seed=args.seed,
                       float16=args.float16, plot=args.plot, verbose=not args.quiet,
                       select_nmi=args.select_nmi, blas_threads=args.blas_threads or None, jobs=args.jobs,
                       scheduler=args.scheduler, memory=args.memory)
    if not args.quiet:
        t = meta["training"]
        for direction, info in t["directions"].items():
            cal = info.get("calibration")
            extra = f", calibration accuracy {cal['accuracy']:.4f}, log-loss {cal['log_loss']:.4f}" if cal else ""
            print(f"{direction}: {info['fit_seconds']:.1f} s, {len(info['history'])} passes{extra}")
        print(f"wrote {args.out}: {t['examples']['fit']} training examples, "
              f"{time.perf_counter() - start:.1f} s, peak memory {t['peak_memory_bytes'] / 2**20:.0f} MiB")
    return 0
