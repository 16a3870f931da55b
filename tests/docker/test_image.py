"""The serving image (docker/Dockerfile), built and run for real.

Specification: the image builds from a host-side wheelhouse on the base image named by
$MOSES_REORDER_DOCKER_BASE (python:3.11-slim by default); run with `--network host` over a
model repository that `moses-reorder pipeline` wrote (the embedded corpus), mounted
read-only, it
- answers the stock grpc.health.v1 check SERVING, listens on 127.0.0.1 only, and Docker's own
  HEALTHCHECK reports it healthy;
- scores exactly as the same models served without a container, and compiles no numba
  kernel to do so (the image's cache has them all);
- picks up a new version dropped into the mounted repository;
- runs as a non-root user that cannot write /models;
- on `docker stop` finishes the requests in flight and exits 0 within the grace period.

No Docker daemon (or no base image): the tests skip and say why; under CI=true that is a
failure instead, since .ci/run starts a daemon so that CI exercises the image.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import pytest

import dockerkit
from dockerkit import docker, remove, run_server, wait_serving

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from serverkit import (expected_scores, free_port, listening_address, probabilities, running_server,  # noqa: E402
                       score_request, score_while_stopping, sentences, subprocess_env, tiled_request)

from server.api import pb, pb_grpc  # noqa: E402

EMBEDDED = Path(__file__).resolve().parents[2] / "training" / "data" / "tanaka-3k"
SVM, LEXICAL = "tanaka-3k-svm", "tanaka-3k-lexical"
TYPE = "hier-msd-bidirectional-fe"


@dataclass(frozen=True)
class Built:
    image: str
    out: Path  # the pipeline's --out: models/, store/

    @property
    def models(self) -> Path:
        return self.out / "models"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    """The image (wheelhouse + docker build) and the pipeline's repository, made side by side."""
    reason = dockerkit.unavailable()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must exercise the container image, but {reason}")
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("pipeline") / "out"
    pipeline = subprocess.Popen([sys.executable, "-m", "training.cli", "pipeline", "--out", str(out), "--quiet"],
                                env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    tag = f"moses-reorder-server:pytest-{os.getpid()}"
    try:
        dockerkit.build_wheelhouse(".")
        dockerkit.build_image(tag)
        _, err = pipeline.communicate(timeout=1800)
    finally:
        if pipeline.poll() is None:
            pipeline.kill()
    assert pipeline.returncode == 0, err[-3000:]
    yield Built(tag, out)
    dockerkit.remove_image(tag)


@pytest.fixture
def container(built):
    """Start containers of the image; each is removed when the test ends."""
    started: list[str] = []

    def start(models: Path, *serve_args: str, env: dict[str, str] | None = None) -> tuple[str, str]:
        port = free_port()
        cid = run_server(built.image, models, port, *serve_args, env=env)
        started.append(cid)
        return cid, f"127.0.0.1:{port}"

    yield start
    for cid in started:
        remove(cid)


def _sentences():
    """Held-out sentences of the embedded corpus as phrase pairs (serverkit.sentences)."""
    return sentences(EMBEDDED, "test", 25)


def _requests(model: str) -> list[pb.ScoreRequest]:
    return [score_request(s, model) for s in _sentences()]


def _score_all(address: str, requests: list[pb.ScoreRequest]) -> list[tuple[int, np.ndarray]]:
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.ReorderingScorerStub(channel)
        answers = [stub.Score(r, timeout=60) for r in requests]
    return [(a.version, probabilities(a)) for a in answers]


def test_serves_the_pipeline_models_exactly_as_without_a_container(built, container):
    cid, address = container(built.models, "--workers", "2", "--poll-seconds", "0",
                             env={"NUMBA_DEBUG_CACHE": "1"})
    wait_serving(address, cid)
    assert listening_address(int(address.rsplit(":", 1)[1])) == "127.0.0.1"  # loopback only

    with running_server(built.models) as host:
        for model in (SVM, LEXICAL):
            requests = _requests(model)
            inside, outside = _score_all(address, requests), _score_all(host.address, requests)
            assert [v for v, _ in inside] == [1] * len(requests)
            for (_, a), (_, b) in zip(inside, outside):
                assert a.shape == b.shape and a.shape[0] > 0
                np.testing.assert_array_equal(a, b)

    # NUMBA_DEBUG_CACHE prints a line per kernel loaded from or saved to the cache: loading the
    # models and scoring both loaded kernels and compiled (saved) none.
    log = docker("logs", cid).stdout
    assert "[cache] data loaded" in log, log[-2000:]
    assert "[cache] data saved" not in log, [line for line in log.splitlines() if "saved" in line][:10]


def test_runs_on_a_read_only_root_with_a_tmpfs_and_compiles_nothing(built):
    """Issue 47: with --read-only numba found no writable cache folder and the server did not
    start. Now the image's cache is read, copied into the tmpfs, and nothing is compiled."""
    port = free_port()
    cid = run_server(built.image, built.models, port, "--poll-seconds", "0", env={"NUMBA_DEBUG_CACHE": "1"},
                     run_args=("--read-only", "--tmpfs", "/tmp"))
    try:
        address = f"127.0.0.1:{port}"
        wait_serving(address, cid)
        with running_server(built.models) as host:
            requests = _requests(SVM)
            for (_, a), (_, b) in zip(_score_all(address, requests), _score_all(host.address, requests)):
                np.testing.assert_array_equal(a, b)
        log = docker("logs", cid).stdout
        assert "[cache] data loaded from '/tmp/" in log, log[-2000:]
        assert "[cache] data saved" not in log, [line for line in log.splitlines() if "saved" in line][:10]
    finally:
        remove(cid)


def test_a_source_change_keeps_the_dependency_layer(built, tmp_path):
    """Issue 47: the source was copied before the wheelhouse was installed, so a one-line change
    reinstalled every dependency. Rebuild from a copy of the context with one source line
    changed: the dependency layer comes from the cache, the source layers do not."""
    context = tmp_path / "context"
    context.mkdir()
    for name in ("pyproject.toml", "README.md", ".dockerignore"):
        shutil.copy2(dockerkit.ROOT / name, context / name)
    for name in ("proto", "training", "server", "docker"):
        shutil.copytree(dockerkit.ROOT / name, context / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    changed = context / "training" / "errors.py"
    changed.write_text(changed.read_text(encoding="utf-8") + "\n# a one-line change\n", encoding="utf-8")
    tag = f"{built.image}-changed"
    try:
        _, log = dockerkit.build_image_log(tag, context, PRECOMPILE="0")
    finally:
        dockerkit.remove_image(tag)
    steps = dockerkit.build_steps(log)
    [deps] = [s for s in steps if "python3 -m venv /opt/moses-reorder" in s.text]
    [source] = [s for s in steps if s.text.startswith("COPY training")]
    assert deps.cached, deps
    assert not source.cached, source


def test_docker_healthcheck_reports_healthy(built, container):
    cid, address = container(built.models, "--poll-seconds", "0")
    wait_serving(address, cid)
    # The image's own HEALTHCHECK (every 15 s) asks 127.0.0.1:$MOSES_REORDER_PORT; one run of it now:
    probe = docker("exec", cid, "sh", "-c", "python -m server.healthcheck --address 127.0.0.1:$MOSES_REORDER_PORT")
    assert "SERVING" in probe.stdout
    started = time.monotonic()
    while (state := docker("inspect", "--format", "{{.State.Health.Status}}", cid).stdout.strip()) == "starting":
        assert time.monotonic() - started < 60, "the HEALTHCHECK never ran"
        time.sleep(1)
    assert state == "healthy", docker("inspect", "--format", "{{json .State.Health}}", cid).stdout


def test_runs_as_a_non_root_user_that_cannot_write_models(built, tmp_path):
    assert docker("image", "inspect", "--format", "{{.Config.User}}", built.image).stdout.strip() == "10001:10001"
    writable = tmp_path / "repo"
    shutil.copytree(built.models, writable)  # mounted read-write: the user still may not write
    result = docker("run", "--rm", "--network", "host", "--volume", f"{writable}:/models", "--entrypoint", "sh",
                    built.image, "-c", "id -u; touch /models/probe", check=False)
    assert result.stdout.split()[0] == "10001"
    assert result.returncode != 0 and "Permission denied" in result.stderr
    assert not (writable / "probe").exists()


def test_a_version_dropped_into_the_mounted_repository_is_swapped_in(built, container, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(built.models, repo)
    cid, address = container(repo, "--poll-seconds", "1")
    wait_serving(address, cid)
    requests = _requests(SVM)
    before = _score_all(address, requests)
    assert {v for v, _ in before} == {1}

    staged = tmp_path / "model.mrw"  # a retrained SVM (other C), written outside, then renamed in
    subprocess.run([sys.executable, "-m", "training.cli", "train", "--family", "svm", "--features", "S6",
                    "--type", TYPE, "--store", str(built.out / "store"), "--out", str(staged), "--C", "0.05",
                    "--quiet"], env=subprocess_env(), check=True, timeout=600)
    (repo / SVM / "2").mkdir()
    os.replace(staged, repo / SVM / "2" / "model.mrw")

    deadline = time.monotonic() + 60
    while (after := _score_all(address, requests))[0][0] != 2:
        assert time.monotonic() < deadline, "version 2 never served: " + docker("logs", cid).stderr[-2000:]
        time.sleep(0.5)
    assert {v for v, _ in after} == {2}
    for sentence, (_, got) in zip(_sentences(), after):
        np.testing.assert_array_equal(got, expected_scores(repo / SVM / "2" / "model.mrw", sentence))
    assert any(not np.array_equal(a, b) for (_, a), (_, b) in zip(after, before)), "v2 scores like v1"


def test_docker_stop_drains_in_flight_requests_within_the_grace_period(built, container):
    cid, address = container(built.models, "--workers", "2", "--grace-seconds", "20", "--cache-size", "0",
                             "--poll-seconds", "0")
    wait_serving(address, cid)
    small = _requests(SVM)[0]
    big = tiled_request(small, 190_000 // len(small.span_start))
    # `docker stop`: SIGTERM, and SIGKILL if the container still runs 30 s later
    results, stop_at, last_end = score_while_stopping(
        address, big, lambda: docker("stop", "--time", "30", cid, timeout=120), calls=2, timeout=120)

    state = json.loads(docker("inspect", "--format", "{{json .State}}", cid).stdout)
    assert state["ExitCode"] == 0, state  # 137 would mean Docker had to SIGKILL it
    assert all(isinstance(r, pb.ScoreResponse) for r in results), results
    assert all(len(r.probabilities) == len(big.span_start) * 6 for r in results)
    assert last_end > stop_at, "no request was in flight at `docker stop`: the test proved nothing"
    events = [json.loads(line).get("event") for line in docker("logs", cid).stderr.splitlines()
              if line.startswith("{")]
    assert "server_draining" in events and events.index("server_draining") < events.index("server_stopped")
