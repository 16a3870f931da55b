"""moses-reorder training: corpus I/O, Moses-exact extraction, features, trainers, weight files.

Everything the server needs to score a phrase pair (feature extraction, weight-file
reading, the families' link functions) lives here and is imported by `server/`, so
training and serving can never disagree on features.
"""

__version__ = "0.1.0"

# Numba keeps this package's compiled kernels in one per-user cache, keyed by source content
# (training/jitcache.py); this must happen before any kernel module is imported.
from training import jitcache as _jitcache  # noqa: E402

_jitcache.install()
