"""The lexicalized table is counted in partitions spilled to disk and comes out the same
whatever the partition count, the jobs or the Dask cluster: Moses's golden table, byte
for byte, and identical .gz files; no spill file is left behind."""

from __future__ import annotations

import gzip

import pytest

from tests.conftest import GOLDEN
from training.moses import table
from training.moses.extract import parse_models
from training.moses.table import build_table, count_pairs, probabilities, sort_lines, table_bytes
from training.moses.types import MosesType
from training.store.build import build_store_from_files
from training.store.examples import ExampleStore

import numpy as np

TYPES = ["hier-mslr-bidirectional-fe", "wbe-msd-backward-fe"]


@pytest.fixture(scope="module")
def store(slice_2k, tmp_path_factory) -> ExampleStore:
    out = tmp_path_factory.mktemp("store") / "s"
    build_store_from_files(slice_2k["src"], slice_2k["tgt"], slice_2k["align"],
                           parse_models(["hier-mslr", "phrase-mslr", "wbe-msd"]), out, chunk_examples=7000,
                           progress=False, jobs=1)
    s = ExampleStore.open(out)
    assert len(s.meta["chunks"]) > 5
    return s


@pytest.fixture(autouse=True)
def workers_for_a_small_store(monkeypatch):
    """jobs=2 starts two workers here, though the store is too small for them to pay."""
    monkeypatch.setattr(table, "WORKER_EXAMPLES", 1)


@pytest.mark.parametrize("moses_type", TYPES)
@pytest.mark.parametrize("jobs, partitions", [(1, 1), (1, 9), (2, 4)])
def test_partitions_and_jobs_give_moses_table(store, moses_type, jobs, partitions, tmp_path):
    out = tmp_path / f"rt.{moses_type}.gz"
    summary = build_table(store, MosesType.parse(moses_type), out, jobs=jobs, partitions=partitions)
    assert summary.partitions == partitions and summary.examples == store.n_examples
    assert gzip.decompress(out.read_bytes()) == gzip.decompress((GOLDEN / out.name).read_bytes())
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_the_gz_file_is_the_same_bytes_for_any_jobs_and_partitions(store, tmp_path, monkeypatch):
    """The .gz is deflated in blocks at fixed offsets of the text (training/pgzip.py), so
    neither the compressing threads nor the partitions' sizes show in its bytes."""
    monkeypatch.setattr("training.pgzip.BLOCK", 1 << 14)  # many blocks, cut inside partitions
    mtype = MosesType.parse(TYPES[0])
    build_table(store, mtype, tmp_path / "one.gz", jobs=1, partitions=1)
    build_table(store, mtype, tmp_path / "two.gz", jobs=2, partitions=7)
    assert (tmp_path / "one.gz").read_bytes() == (tmp_path / "two.gz").read_bytes()
    assert gzip.decompress((tmp_path / "two.gz").read_bytes()) == gzip.decompress(
        (GOLDEN / f"rt.{TYPES[0]}.gz").read_bytes())


def test_a_small_store_runs_in_process_whatever_the_jobs(store, tmp_path, monkeypatch):
    monkeypatch.setattr(table, "WORKER_EXAMPLES", store.n_examples)  # one worker's worth: no pool
    monkeypatch.setattr("training.parallel.ProcessPoolExecutor", None)  # would fail if started
    build_table(store, MosesType.parse(TYPES[1]), tmp_path / "rt.gz", jobs=2)
    assert gzip.decompress((tmp_path / "rt.gz").read_bytes()) == gzip.decompress(
        (GOLDEN / f"rt.{TYPES[1]}.gz").read_bytes())


def test_dask_cluster_gives_the_same_file(store, dask_cluster, tmp_path):
    mtype = MosesType.parse(TYPES[0])
    build_table(store, mtype, tmp_path / "one.gz", jobs=1)
    build_table(store, mtype, tmp_path / "dask.gz", scheduler=dask_cluster, partitions=5)
    assert (tmp_path / "one.gz").read_bytes() == (tmp_path / "dask.gz").read_bytes()


def test_streamed_table_is_the_in_memory_table(store, tmp_path):
    mtype = MosesType.parse("phrase-mslr-bidirectional-f")
    summary = build_table(store, mtype, tmp_path / "rt", partitions=6, jobs=2)
    counts = count_pairs(store, mtype)
    assert (tmp_path / "rt").read_bytes() == table_bytes(store, counts, probabilities(counts.counts))
    assert summary.rows == counts.keys.size


def test_lines_sort_bytewise_as_python_sorts_bytes():
    lines = [b"a b", b"a", b"a\r", b"", b"\xe3\x81\x82 x", b"ab", b"a b", b"Z"]
    blob = np.frombuffer(b"".join(line + b"\n" for line in lines), dtype=np.uint8)
    assert sort_lines(blob).tobytes() == b"".join(line + b"\n" for line in sorted(lines))


def test_empty_partitions_and_an_empty_store(store, tmp_path):
    """More partitions than first words leaves some empty; an empty corpus gives an empty table."""
    mtype = MosesType.parse(TYPES[1])
    many = build_table(store, mtype, tmp_path / "many.gz", partitions=len(store.src_vocab) + 50)
    assert gzip.decompress((tmp_path / "many.gz").read_bytes()) == \
        gzip.decompress((GOLDEN / f"rt.{TYPES[1]}.gz").read_bytes())
    assert many.partitions > len(store.src_vocab)
    for name in ("e.ja", "e.en", "e.align"):
        (tmp_path / name).write_bytes(b"")
    build_store_from_files(tmp_path / "e.ja", tmp_path / "e.en", tmp_path / "e.align", parse_models(["wbe-msd"]),
                           tmp_path / "empty", progress=False)
    summary = build_table(ExampleStore.open(tmp_path / "empty"), mtype, tmp_path / "rt")
    assert (summary.examples, summary.rows) == (0, 0) and (tmp_path / "rt").read_bytes() == b""


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_partition_over_the_budget_is_done_in_merged_runs(store, jobs, tmp_path):
    """One partition of 65k examples under --memory 64M (~42k examples a task, per job):
    key-hash runs sorted apart and merged give Moses's table."""
    mtype = MosesType.parse(TYPES[0])
    out = tmp_path / f"rt.{TYPES[0]}.gz"
    assert store.n_examples > (64 << 20) // 8 // 200
    build_table(store, mtype, out, memory="64M", partitions=1, jobs=jobs)
    assert gzip.decompress(out.read_bytes()) == gzip.decompress((GOLDEN / out.name).read_bytes())
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]
