"""Feature keys are pinned: the same integers in a fresh process, today and in every release.

If this test fails, the key scheme changed and every weight file ever written is
invalid: bump training.features.hashing.HASH_SCHEME instead of updating the numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys

CODE = """
import json
from training.modelfile.request import batch_from_strings
from training.features.templates import extract_keys
from training.features.spec import FeatureSpec
src = '彼 は 昨日 東京 へ 行っ た'.split()
batch = batch_from_strings(src, [(3, 5, ['to', 'tokyo'], [(0, 1), (1, 0)])])
print(json.dumps({s: extract_keys(batch, FeatureSpec.parse(s))[1].tolist() for s in ('S7', 'S6', 'pair')}))
"""

PINNED_S7 = [298846393835124950, 8680156568657336801, 14389117597334993462, 16276423700609752908]
PINNED_S6_FIRST = [298846393835124950, 3008159654379887911, 3296055741515765654]
PINNED_PAIR = [4655952940599063097]


def test_keys_pinned_in_fresh_process():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True)
    keys = json.loads(out.stdout)
    assert keys["S7"] == PINNED_S7
    assert len(keys["S6"]) == 21 and keys["S6"][:3] == PINNED_S6_FIRST
    assert keys["pair"] == PINNED_PAIR
