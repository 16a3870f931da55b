"""Feature keys are stable across processes and machines: pinned test vectors."""

import subprocess
import sys

import numpy as np

from training.features import hashing


def test_fnv1a64_known_vectors():
    # Published FNV-1a 64 vectors.
    assert hashing.hash_string("") == np.uint64(0xCBF29CE484222325)
    assert hashing.hash_string("a") == np.uint64(0xAF63DC4C8601EC8C)
    assert hashing.hash_string("foobar") == np.uint64(0x85944171F73967E8)


def test_token_hash_is_utf8_bytes():
    assert hashing.hash_string("誰") == hashing.hash_tokens(["誰"])[0]
    blob, offsets = hashing.encode_tokens(["誰", "が", ""])
    assert offsets.tolist() == [0, 3, 6, 6]
    assert hashing.hash_token_blob(blob, offsets).tolist() == [
        int(hashing.hash_string("誰")), int(hashing.hash_string("が")), 0xCBF29CE484222325]


def test_combine_finalize_pinned():
    h = hashing.finalize(hashing.combine(hashing.hash_string("tag"), hashing.hash_string("word")))
    assert int(h) == PINNED_COMBINED


def test_same_value_in_a_fresh_process():
    code = "from training.features import hashing; print(int(hashing.hash_string('私')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == int(hashing.hash_string("私"))


PINNED_COMBINED = 9519121797270006239  # also computed independently in pure Python
