"""Whether numba's on-disk cache already holds a compiled function, so a first run can say
why it is slow.

The hot loops are numba functions compiled with `cache=True`: the first run on a machine
(or after NUMBA_CACHE_DIR changes) compiles them, about 45 s for `pipeline`, and later runs
load them from the cache in well under a second. This module only looks; it must not
compile anything.
"""

from __future__ import annotations

import os


def is_cold(dispatcher) -> bool:
    """True if `dispatcher` (an @njit(cache=True) function) has no cache index on disk yet:
    calling it will compile. False when numba's cache cannot be inspected (say nothing)."""
    try:
        index = dispatcher._cache._cache_file._index_path  # numba.core.caching.IndexDataCacheFile
    except AttributeError:
        return False
    return not os.path.exists(index)


FIRST_RUN_NOTE = ("first run on this machine: compiling the numba functions (about 45 s, once; "
                  "later runs load them from numba's cache)")
