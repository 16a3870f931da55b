"""A MegaM-compatible binary logistic regression, so Moses's PRO tuning runs offline.

mert-moses.pl --pairwise-ranked (PRO, Hopkins & May 2011) turns each n-best list into
pairs of translations with Moses's `pro`, then runs

    MERTDIR/megam_i686.opt -fvals -maxi 30 -nobias binary runN.pro.data

and reads the weights from its stdout (`get_weights_from_mert`: lines `F<i> <weight>` for
the dense features, `<name_with_underscore> <weight>` for sparse ones). When the file is
missing it downloads MegaM, which fails without a network. This module is that
program for the subset mert-moses.pl uses; `moses-reorder-megam` is its console script:

    ln -s "$(command -v moses-reorder-megam)" "$MOSES/bin/megam_i686.opt"

Input (`pro -o`; MegaM's -fvals format): one example per line, a label then
`name value` pairs, e.g. `1 F0 -0.5 F3 1.25 LexicalReordering0_x 1`; a label below 0.5
is the negative class (MegaM's `binary` rule). A line with a label only is an example
whose features all cancel.

Objective, as MegaM's binary optimizer (cg.ml: its gradient is
sum_n y_n (1 - sigma(y_n w.x_n)) x_n - lambda w): with y_n in {-1, +1},

    maximise  sum_n log sigma(y_n w.x_n) - lambda/2 ||w||^2

lambda (`-lambda`, default 1) being the precision of a zero-mean Gaussian prior on every
weight (the bias too, when there is one). That is scikit-learn's
LogisticRegression(C=1/lambda, fit_intercept=False) (tests/moses/test_megam.py checks it
on real PRO samples). MegaM runs exactly `-maxi` conjugate-gradient iterations; this
program runs truncated Newton (scipy's Newton-CG, exact Hessian-vector products) on the
same objective, with a diagonal (Jacobi) change of variables so that features of very
different scales (LM log-probabilities, word penalty, reordering scores) converge
together, to convergence, with `-maxi` as its cap on Newton steps (a warning on stderr if
the cap stops it first; about 15 steps are needed on real PRO samples).

Output, as MegaM prints it: `**BIAS** w` first if there is a bias, then every feature in
order of first appearance in the file, `name w` with w in fixed notation (never an
exponent, which mert-moses.pl's regular expression would cut), weights with |w| <= 1e-10
left out. Per-iteration progress goes to stderr unless -quiet.

It must not grow into a general MegaM: other model types and options are refused with
a usage error (exit 2); unreadable input exits 3 naming the file and line.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from collections.abc import Sequence

import numpy as np

BIAS = "**BIAS**"
DEFAULT_LAMBDA = 1.0       # MegaM's default -lambda
DEFAULT_MAXI = 100         # MegaM's default -maxi for maxent models
STEP_TOLERANCE = 1e-12     # Newton-CG stops when the mean |step| of the (scaled) weights is below this
PRINT_THRESHOLD = 1e-10    # MegaM leaves |w| <= 1e-10 out of its output

USAGE = """usage: moses-reorder-megam [-fvals] [-nobias] [-maxi N] [-lambda F] [-quiet] binary FILE

A MegaM-compatible binary logistic regression for Moses's PRO (mert-moses.pl --pairwise-ranked).
  -fvals      features are `name value` pairs (without it: names only, value 1)
  -nobias     no bias feature
  -maxi N     at most N Newton steps (default 100)
  -lambda F   precision of the Gaussian prior on the weights (default 1)
  -quiet      no per-iteration output on stderr
Install where mert-moses.pl looks:  ln -s "$(command -v moses-reorder-megam)" MERTDIR/megam_i686.opt
"""


class UsageError(Exception):
    """Bad command line (exit 2)."""


@dataclass(frozen=True)
class Samples:
    """Examples as a CSR matrix over features named in order of first appearance."""

    names: list[str]
    X: "object"            # scipy.sparse.csr_matrix [n, len(names)]
    y: np.ndarray          # float64, +1 / -1


def read_samples(path: str, *, fvals: bool = True, bias: bool = False) -> Samples:
    """Read MegaM's binary input format; with `bias`, feature 0 is the constant **BIAS**."""
    from scipy import sparse

    from training.errors import InputError

    names: list[str] = [BIAS] if bias else []
    index: dict[str, int] = {}
    indptr, indices, values, labels = [0], [], [], []
    try:
        handle = open(path, "r", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from None
    with handle:
        for line_number, line in enumerate(handle, 1):
            tokens = line.split()
            if not tokens:
                continue
            if tokens[0] in ("DEV", "TEST"):
                raise InputError("DEV/TEST sections are not supported", path, line_number)
            try:
                label = float(tokens[0])
            except ValueError:
                raise InputError(f"label {tokens[0]!r} is not a number", path, line_number) from None
            labels.append(1.0 if label >= 0.5 else -1.0)
            if bias:
                indices.append(0)
                values.append(1.0)
            features = tokens[1:]
            if fvals:
                if len(features) % 2:
                    raise InputError("features must come as `name value` pairs (-fvals)", path, line_number)
                pairs = zip(features[0::2], features[1::2])
            else:
                pairs = ((name, "1") for name in features)
            for name, text in pairs:
                try:
                    value = float(text)
                except ValueError:
                    raise InputError(f"value {text!r} of feature {name!r} is not a number",
                                     path, line_number) from None
                j = index.get(name)
                if j is None:
                    j = index[name] = len(names)
                    names.append(name)
                indices.append(j)
                values.append(value)
            indptr.append(len(indices))
    if not labels:
        raise InputError("no examples", path)
    X = sparse.csr_matrix((np.asarray(values, dtype=np.float64), np.asarray(indices, dtype=np.int64),
                           np.asarray(indptr, dtype=np.int64)), shape=(len(labels), len(names)))
    X.sum_duplicates()  # a name repeated on one line adds up, as a dot product with it would
    return Samples(names, X, np.asarray(labels, dtype=np.float64))


@dataclass(frozen=True)
class Fit:
    w: np.ndarray
    objective: float       # sum_n log(1 + exp(-y_n w.x_n)) + lambda/2 ||w||^2 (minimised)
    iterations: int
    converged: bool


def fit(X, y: np.ndarray, *, lam: float = DEFAULT_LAMBDA, maxi: int = DEFAULT_MAXI,
        progress=None) -> Fit:
    """Minimise sum_n log(1 + exp(-y_n w.x_n)) + lam/2 ||w||^2 by truncated Newton.

    scipy's Newton-CG with exact Hessian-vector products X^T S X p + lam p (S = the
    logistic variances), so no Hessian is ever formed and thousands of sparse features
    cost what their non-zeros cost. Jacobi change of variables w = v / d,
    d_j = sqrt(H_jj(0)) = sqrt(sum_n x_nj^2 / 4 + lam) (the Hessian's diagonal at w = 0):
    the same minimiser, a better-conditioned inner CG. On real PRO samples it converges
    in about 15 Newton steps; L-BFGS needed more than MegaM's 30 on a 2,400-line slice.
    """
    from scipy.optimize import minimize
    from scipy.special import expit, log_expit

    n, m = X.shape
    if m == 0:
        return Fit(np.zeros(0), float(n * np.log(2.0)), 0, True)
    d = np.sqrt(np.asarray(X.multiply(X).sum(axis=0)).ravel() / 4.0 + lam)
    d[d == 0] = 1.0                          # lam = 0 and a feature that is always 0
    Xs = (X @ _diag(1.0 / d)).tocsr()        # columns scaled: z = Xs v
    lam_v = lam / d ** 2                     # penalty lam/2 sum (v_j/d_j)^2

    def objective(v):
        margin = y * (Xs @ v)
        loss = -log_expit(margin).sum() + 0.5 * float(lam_v @ (v * v))
        grad = Xs.T @ (-y * expit(-margin)) + lam_v * v
        return loss, grad

    def hessp(v, p):
        z = Xs @ v
        return Xs.T @ (expit(z) * expit(-z) * (Xs @ p)) + lam_v * p

    iteration = [0]

    def callback(v):
        iteration[0] += 1
        if progress is not None:
            progress(f"it {iteration[0]:>3}  objective {objective(v)[0]:.10g}")

    result = minimize(objective, np.zeros(m), jac=True, hessp=hessp, method="Newton-CG", callback=callback,
                      options={"maxiter": maxi, "xtol": STEP_TOLERANCE})
    return Fit(result.x / d, float(result.fun), int(result.nit), bool(result.status == 0))


def _diag(values: np.ndarray):
    from scipy import sparse

    return sparse.diags(values, format="csr")


def format_weight(w: float) -> str:
    """Fixed notation with 20 decimals, as MegaM's `%10.20f` (no exponent for perl to cut)."""
    return f"{w:.20f}"


def weight_lines(names: Sequence[str], w: np.ndarray) -> list[str]:
    return [f"{name} {format_weight(float(value))}" for name, value in zip(names, w)
            if abs(value) > PRINT_THRESHOLD]


@dataclass
class Options:
    fvals: bool = False
    bias: bool = True
    maxi: int = DEFAULT_MAXI
    lam: float = DEFAULT_LAMBDA
    quiet: bool = False
    path: str = ""


def parse_args(argv: Sequence[str]) -> Options:
    """MegaM's command line: options, then the model type, then the file (always last)."""
    if len(argv) < 2:
        raise UsageError("not enough arguments")
    *options, model_type, path = argv
    if model_type != "binary":
        raise UsageError(f"model type {model_type!r} is not supported (only `binary`, what PRO uses)")
    opts = Options(path=path)
    i = 0
    while i < len(options):
        flag = options[i]
        if flag == "-fvals":
            opts.fvals = True
        elif flag == "-nobias":
            opts.bias = False
        elif flag == "-quiet":
            opts.quiet = True
        elif flag in ("-maxi", "-lambda"):
            if i + 1 >= len(options):
                raise UsageError(f"{flag} expects an argument")
            text = options[i + 1]
            i += 1
            try:
                if flag == "-maxi":
                    opts.maxi = int(text)
                else:
                    opts.lam = float(text)
            except ValueError:
                raise UsageError(f"{flag} expects {'an integer' if flag == '-maxi' else 'a number'}, "
                                 f"not {text!r}") from None
        else:
            raise UsageError(f"option {flag!r} is not supported")
        i += 1
    if opts.maxi < 1:
        raise UsageError("-maxi should be >= 1")
    if not opts.lam >= 0:
        raise UsageError("-lambda should be >= 0")
    return opts


def main(argv: Sequence[str] | None = None) -> int:
    from training.errors import InputError

    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        opts = parse_args(argv)
    except UsageError as exc:
        sys.stderr.write(USAGE + f"error: {exc}\n")
        return 2
    try:
        samples = read_samples(opts.path, fvals=opts.fvals, bias=opts.bias)
    except InputError as exc:
        sys.stderr.write(f"moses-reorder-megam: {exc}\n")
        return 3

    def progress(line: str) -> None:
        sys.stderr.write(line + "\n")

    n, m = samples.X.shape
    if not opts.quiet:
        progress(f"{n} examples, {m} features, lambda {opts.lam:g}, at most {opts.maxi} Newton steps")
    result = fit(samples.X, samples.y, lam=opts.lam, maxi=opts.maxi, progress=None if opts.quiet else progress)
    if not result.converged:
        sys.stderr.write(f"moses-reorder-megam: warning: stopped by -maxi {opts.maxi} before converging\n")
    sys.stdout.write("".join(line + "\n" for line in weight_lines(samples.names, result.w)))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
