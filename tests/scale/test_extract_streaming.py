"""Extraction streams the corpus in sentence ranges and gives the same store whatever the
range size, the number of jobs or the Dask cluster: checksums of every file of the store,
Moses's extract text included, against the in-memory build of the same corpus."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from training.corpus.reading import plan_corpus, read_corpus
from training.errors import InputError
from training.moses.extract import parse_models
from training.store import build
from training.store.build import build_store, build_store_from_files
from training.store.examples import ExampleStore

MODELS = parse_models(["hier-msd", "wbe-mslr"])


def store_digest(path: Path) -> dict[str, str]:
    """SHA-256 of every file of a store (store.json without its creation time)."""
    out = {}
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        data = file.read_bytes()
        if file.name == "store.json":
            meta = json.loads(data)
            del meta["created_at"]
            data = json.dumps(meta, sort_keys=True).encode()
        out[str(file.relative_to(path))] = hashlib.sha256(data).hexdigest()
    return out


@pytest.fixture(scope="module")
def in_memory(slice_2k, tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("mem") / "store"
    corpus = read_corpus(slice_2k["src"], slice_2k["tgt"], slice_2k["align"])
    build_store(corpus, MODELS, out, chunk_examples=5000, moses_format=True, progress=False)
    return store_digest(out)


def from_files(files, out, **kwargs) -> dict[str, str]:
    build_store_from_files(files["src"], files["tgt"], files["align"], MODELS, out, chunk_examples=5000,
                           moses_format=True, progress=False, **kwargs)
    return store_digest(out)


def test_small_ranges_make_the_in_memory_store(slice_2k, in_memory, tmp_path):
    plan = plan_corpus(slice_2k["src"], slice_2k["tgt"], slice_2k["align"], range_bytes=7000)
    assert len(plan.ranges) > 10
    assert [r.first for r in plan.ranges[1:]] == [r.stop for r in plan.ranges[:-1]]
    digest = from_files(slice_2k, tmp_path / "s", jobs=1, range_bytes=7000)
    assert digest == in_memory
    assert len(ExampleStore.open(tmp_path / "s").meta["chunks"]) > 5


def test_one_range_makes_the_same_store(slice_2k, in_memory, tmp_path):
    assert from_files(slice_2k, tmp_path / "s", jobs=1, range_bytes=1 << 30) == in_memory


@pytest.fixture()
def workers(monkeypatch):
    """jobs=2 starts two workers, though the corpus is too small for them to pay."""
    monkeypatch.setattr(build, "WORKER_SOURCE_BYTES", 1)


def test_two_jobs_make_the_same_store(slice_2k, in_memory, tmp_path, workers):
    assert from_files(slice_2k, tmp_path / "s", jobs=2, range_bytes=20000) == in_memory


def test_a_dask_cluster_makes_the_same_store(slice_2k, in_memory, dask_cluster, tmp_path):
    assert from_files(slice_2k, tmp_path / "s", scheduler=dask_cluster, range_bytes=20000) == in_memory


def test_an_error_in_a_later_range_names_the_file_line(slice_2k, tmp_path, workers):
    files = {side: tmp_path / path.name for side, path in slice_2k.items()}
    for side, path in slice_2k.items():
        files[side].write_bytes(path.read_bytes())
    lines = files["align"].read_text().split("\n")
    lines[1500] = lines[1500] + " 0-99"
    files["align"].write_text("\n".join(lines))
    for jobs in (1, 2):
        with pytest.raises(InputError, match=rf"{files['align'].name}:1501: alignment point 0-99 out of range"):
            build_store_from_files(files["src"], files["tgt"], files["align"], MODELS, tmp_path / f"s{jobs}",
                                   progress=False, jobs=jobs, range_bytes=7000)
        assert not (tmp_path / f"s{jobs}").exists()


def test_a_file_without_final_newline_reads_like_one_with(slice_2k, in_memory, tmp_path):
    files = {side: tmp_path / path.name for side, path in slice_2k.items()}
    for side, path in slice_2k.items():
        files[side].write_bytes(path.read_bytes().rstrip(b"\n"))
    plan = plan_corpus(files["src"], files["tgt"], files["align"], range_bytes=7000)
    assert plan.n_sentences == 2000
    digest = from_files(files, tmp_path / "s", jobs=1, range_bytes=7000)
    assert {k: v for k, v in digest.items() if k != "store.json"} == \
        {k: v for k, v in in_memory.items() if k != "store.json"}


def test_cli_jobs_and_memory_flags(slice_2k, tmp_path, capsys):
    from training.cli import main

    def extract(out, *flags):
        return main(["extract", "--src", str(slice_2k["src"]), "--tgt", str(slice_2k["tgt"]), "--align",
                     str(slice_2k["align"]), "--out", str(out), "--quiet", *flags])

    assert extract(tmp_path / "a", "--jobs", "1") == 0
    assert extract(tmp_path / "b", "--jobs", "2", "--memory", "64M") == 0
    assert store_digest(tmp_path / "a") == store_digest(tmp_path / "b")
    assert extract(tmp_path / "c", "--memory", "lots") == 2  # usage
    assert "--memory" in capsys.readouterr().err and not (tmp_path / "c").exists()
    assert main(["lexical", "--store", str(tmp_path / "a"), "--type", "wbe-msd-backward-fe",
                 "--out", str(tmp_path / "rt"), "--jobs", "2", "--quiet"]) == 0
    assert (tmp_path / "rt").stat().st_size > 0
