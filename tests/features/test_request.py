"""Request arrays -> PairBatch: every malformed field is refused with an error naming it."""

from __future__ import annotations

import numpy as np
import pytest

from training.errors import InputError
from training.features.hashing import hash_tokens
from training.modelfile.request import arrays_from_strings, batch_from_request_arrays

SOURCE = ["私", "は", "学生", "です"]
PAIRS = [(0, 1, ["i"], [(0, 0)]), (2, 4, ["am", "a", "student"], [(0, 2), (1, 0)])]


def good() -> dict:
    return arrays_from_strings(SOURCE, PAIRS)


def test_batch_content():
    batch = batch_from_request_arrays(**good())
    assert batch.n_pairs == 2 and batch.n_sentences == 1
    assert batch.src_tokens.tolist() == hash_tokens(SOURCE).tolist()
    assert batch.tgt_tokens.tolist() == hash_tokens(["i", "am", "a", "student"]).tolist()
    assert batch.src_start.tolist() == [0, 2] and batch.src_end.tolist() == [1, 4]
    assert batch.tgt_offsets.tolist() == [0, 1, 4] and batch.align_offsets.tolist() == [0, 1, 3]
    assert batch.align_src.tolist() == [0, 0, 1] and batch.align_tgt.tolist() == [0, 2, 0]
    assert batch.src_start.dtype == np.int32 and batch.align_src.dtype == np.int16


def test_accepts_plain_lists_like_protobuf_fields():
    fields = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in good().items()}
    assert batch_from_request_arrays(**fields).n_pairs == 2


def refused(field: str, **changes) -> str:
    fields = good()
    fields.update(changes)
    with pytest.raises(InputError) as info:
        batch_from_request_arrays(**fields)
    assert f"field {field}" in str(info.value)
    return str(info.value)


def test_token_table_errors():
    f = good()
    refused("token_offsets", token_offsets=[])
    refused("token_offsets", token_offsets=np.r_[1, f["token_offsets"][1:]])
    refused("token_offsets", token_offsets=np.r_[f["token_offsets"][:-1], f["token_offsets"][-1] + 5])
    offs = f["token_offsets"].astype(np.int64)
    offs[2], offs[3] = offs[3], offs[2]
    assert "monotone" in refused("token_offsets", token_offsets=offs)
    refused("token_bytes", token_bytes="not bytes")


def test_source_and_span_errors():
    n_tokens = len(good()["token_offsets"]) - 1
    refused("source", source=[0, 1, n_tokens])
    refused("span_start", span_start=[1, 2])            # pair 0 would be 1..1: empty
    refused("span_end", span_end=[1, 5])                # past the source's 4 words
    refused("span_end", span_end=[1])
    refused("span_start", span_start=[-1, 2])


def test_target_errors():
    refused("target_offsets", target_offsets=[0, 1])
    refused("target_offsets", target_offsets=[0, 3, 1])
    refused("target_offsets", target_offsets=[0, 1, 5])
    refused("target_tokens", target_tokens=[0, 1, 2, 999])


def test_alignment_errors():
    assert "source phrase length" in refused("align_source", align_source=[0, 2, 1])  # pair 1 has 2 words
    assert "target phrase length" in refused("align_target", align_target=[1, 2, 0])  # pair 0 has 1 word
    refused("align_target", align_target=[0, 2])
    refused("align_offsets", align_offsets=[0, 2, 2])
    refused("align_offsets", align_offsets=[0, 1])


def test_empty_request_is_fine():
    batch = batch_from_request_arrays(**arrays_from_strings(["a"], []))
    assert batch.n_pairs == 0
