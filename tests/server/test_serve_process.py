"""`moses-reorder serve` as a real process: start-up, several workers, SIGTERM drains.

Specification: the command logs JSON lines and a `listening` event with its port; with
--workers 2 both worker processes share the port (SO_REUSEPORT) and the supervisor's
/metrics aggregates them; SIGTERM lets requests already running finish with OK answers,
then the process exits 0.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import pytest

from serverkit import (expected_scores, free_port, model_path, probabilities, score_request, score_while_stopping,
                       serve_process, subprocess_env, tiled_request, write_test_model)
from server.api import pb, pb_grpc


def test_sigterm_drains_in_flight_requests(repo_root, corpus_keys, test_sentences):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    server = serve_process(repo_root, grace_seconds=30, cache_size=0)
    codes = []
    try:
        small = score_request(test_sentences[0], "m")
        big = tiled_request(small, 190_000 // len(small.span_start))
        results, sigterm_at, last_end = score_while_stopping(
            f"127.0.0.1:{server.port}", big, lambda: codes.append(server.stop()), calls=3, timeout=60)
    finally:
        server.stop()
    code = codes[0]
    assert code == 0, server.events[-5:]
    assert all(isinstance(r, pb.ScoreResponse) for r in results), results
    assert all(len(r.probabilities) == len(big.span_start) * 6 for r in results)
    assert last_end > sigterm_at, "no request was in flight at SIGTERM: the test proved nothing"
    names = server.names()
    assert names.index("server_draining") < names.index("server_stopped")


def test_two_workers_share_the_port_reload_all_and_aggregate_metrics(repo_root, corpus_keys, test_sentences):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    metrics_port = free_port()
    server = serve_process(repo_root, workers=2, metrics_port=metrics_port, enable_admin=True)
    try:
        listening = next(e for e in server.events if e.get("event") == "listening")
        assert len(listening["worker_pids"]) == 2
        n = 12
        for i in range(n):  # a fresh channel per call, so connections spread over both workers
            with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                response = pb_grpc.ReorderingScorerStub(channel).Score(score_request(test_sentences[i], "m"))
                assert probabilities(response).shape == (len(test_sentences[i].pairs), 6)
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        ok = [float(line.split(" ")[1]) for line in text.splitlines()
              if line.startswith("moses_reorder_requests_total{") and 'code="OK"' in line and "Score" in line]
        assert sum(ok) == n
        loaded = [line for line in text.splitlines() if line.startswith("moses_reorder_loaded_versions{")]
        assert len(loaded) == 2  # one live series per worker process

        # Reload reaches one worker; it has the supervisor tell the other (no polling here)
        write_test_model(model_path(repo_root, "m", 2), corpus_keys, seed=2)
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            pb_grpc.ReorderingScorerStub(channel).Reload(pb.ReloadRequest(model="m"))
        deadline = time.monotonic() + 30
        while True:
            pids = {e["pid"] for e in list(server.events) if e.get("event") == "version_loaded" and e["version"] == 2}
            if pids == set(listening["worker_pids"]):
                break
            assert time.monotonic() < deadline, f"only workers {pids} loaded version 2"
            time.sleep(0.05)
        for _ in range(4):
            with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                assert pb_grpc.ReorderingScorerStub(channel).GetModel(pb.GetModelRequest(model="m")).version == 2
    finally:
        code = server.stop()
    assert code == 0, server.events[-5:]
    assert server.names().count("server_stopped") == 3  # two workers and the supervisor


def test_bad_repository_root_is_a_clear_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "training.cli", "serve", "--models", str(tmp_path / "none"),
                           "--port", "0"], capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert proc.returncode == 3
    assert "--models" in proc.stderr and str(tmp_path / "none") in proc.stderr


@pytest.mark.parametrize("flag", ["--max-pairs", "--workers", "--max-keys", "--max-align-points"])
def test_nonsense_limits_are_refused(repo_root, flag):
    proc = subprocess.run([sys.executable, "-m", "training.cli", "serve", "--models", str(repo_root),
                           flag, "0"], capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert proc.returncode == 2 and flag in proc.stderr  # a usage error, as argparse's


@pytest.mark.parametrize("args, named, code", [(["--tls-cert", "{root}"], "--tls-key", 2),
                                                (["--tls-cert", "{root}/none.pem", "--tls-key", "{root}/none.key"],
                                                 "--tls-cert", 3),
                                                (["--cache-mb", "-1"], "--cache-mb", 2)])
def test_unusable_tls_and_cache_settings_are_refused(repo_root, args, named, code):
    """Options that do not go together or are out of range: usage (2); files that are not there: input (3)."""
    proc = subprocess.run([sys.executable, "-m", "training.cli", "serve", "--models", str(repo_root),
                           *[a.format(root=repo_root) for a in args]],
                          capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert proc.returncode == code and named in proc.stderr, proc.stderr[-2000:]


def test_port_per_worker_with_client_side_round_robin(repo_root, corpus_keys, test_sentences):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    metrics_port = free_port()
    server = serve_process(repo_root, workers=2, port_per_worker=True, metrics_port=metrics_port)
    try:
        ports = next(e for e in server.events if e.get("event") == "listening")["ports"]
        assert len(ports) == 2
        target = "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in ports)
        request = score_request(test_sentences[0], "m")
        with grpc.insecure_channel(target, options=[("grpc.lb_policy_name", "round_robin")]) as channel:
            stub = pb_grpc.ReorderingScorerStub(channel)
            answers = {stub.Score(request, wait_for_ready=True).SerializeToString() for _ in range(10)}
        assert len(answers) == 1  # both workers score identically
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        misses = [float(line.split(" ")[1]) for line in text.splitlines()
                  if line.startswith("moses_reorder_cache_misses_total")]
        # one channel, the same request 10 times: each worker's own cache missed it once,
        # so both workers got RPCs from the one channel
        assert misses == [2.0]
    finally:
        code = server.stop()
    assert code == 0, server.events[-5:]


def test_a_port_in_use_is_a_clear_error(repo_root):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        for workers in ("1", "2"):
            proc = subprocess.run([sys.executable, "-m", "training.cli", "serve", "--models", str(repo_root),
                                   "--host", "127.0.0.1", "--port", str(port), "--workers", workers],
                                  capture_output=True, text=True, env=subprocess_env(), timeout=120)
            assert proc.returncode == 5, proc.stderr[-2000:]  # cannot listen: not bad input data (3)
            assert f"127.0.0.1:{port}" in proc.stderr and "--port" in proc.stderr
            assert "add_port" not in proc.stderr, proc.stderr  # gRPC's raw log line stays out


def test_a_port_held_by_another_multi_worker_server_is_refused(repo_root, corpus_keys):
    """SO_REUSEPORT would let a second server join the first one's port and answer part of
    its requests; it must be refused like any port in use."""
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    port = free_port()
    first = serve_process(repo_root, workers=2, port=port)
    try:
        for workers in ("2", "1"):
            second = subprocess.Popen([sys.executable, "-m", "training.cli", "serve", "--models", str(repo_root),
                                       "--host", "127.0.0.1", "--port", str(port), "--workers", workers],
                                      stderr=subprocess.PIPE, text=True, env=subprocess_env())
            try:
                _, err = second.communicate(timeout=120)
            except subprocess.TimeoutExpired:  # it started: the defect (stop it and its workers)
                second.send_signal(signal.SIGTERM)
                second.communicate(timeout=60)
                raise AssertionError(f"a second server (--workers {workers}) started on the busy port {port}")
            assert second.returncode == 5, err[-2000:]
            assert f"127.0.0.1:{port}" in err and "address already in use" in err and "--port" in err
            assert "add_port" not in err, err  # no raw gRPC log line before our message
    finally:
        assert first.stop() == 0


def _exit_seconds(server) -> float:
    started = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(120)
    return time.monotonic() - started


def test_sigterm_exits_within_the_grace_period_even_with_a_long_request_in_flight(repo_root, corpus_keys):
    from test_limits import quadratic_request

    write_test_model(model_path(repo_root, "s8", 1), corpus_keys, features="S8")
    grace = 2.0
    server = serve_process(repo_root, grace_seconds=grace, max_keys=10 ** 9, max_message_mb=64,
                           cache_size=0)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        stub = pb_grpc.ReorderingScorerStub(channel)
        small = quadratic_request("s8", 500)  # ~640k keys: sizes the big one on this machine
        stub.Score(small, timeout=120)
        started = time.monotonic()
        stub.Score(small, timeout=120)
        per_pair = (time.monotonic() - started) / 500
        n_pairs = int(min(200_000, max(20_000, 30.0 / per_pair)))  # ~30 s of work, or more
        outcome, big = [], quadratic_request("s8", n_pairs)

        def call():
            try:
                outcome.append(stub.Score(big, timeout=600))
            except grpc.RpcError as exc:
                outcome.append(exc.code())

        thread = threading.Thread(target=call)
        thread.start()
        time.sleep(3.0)  # the request is being scored (the server logs score_abandoned below if so)
        assert not outcome, "the long request finished before SIGTERM: the test proved nothing"
        took = _exit_seconds(server)
        thread.join(60)
        channel.close()
    finally:
        server.stop()
    assert server.proc.returncode == 0, server.events[-5:]
    assert took < grace + 5.0, f"exit took {took:.1f} s with --grace-seconds {grace}"
    assert outcome and outcome[0] in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), outcome
    assert "score_abandoned" in server.names(), (took, server.events[-6:])


def test_a_served_file_truncated_or_copied_over_keeps_serving_the_validated_version(repo_root, corpus_keys,
                                                                                  test_sentences, tmp_path):
    """An operator's `cp` onto a served file must neither kill the server (SIGBUS on a
    mapped file) nor change its answers while GetModel says LOADED."""
    served = write_test_model(model_path(repo_root, "m", 1), corpus_keys, seed=1)
    other = write_test_model(tmp_path / "other.mrw", corpus_keys, seed=2)
    sentences = test_sentences[:4]
    expected = [expected_scores(served, s) for s in sentences]
    assert not np.array_equal(expected[0], expected_scores(other, sentences[0]))
    server = serve_process(repo_root, poll_seconds=0.2, cache_size=0)
    wrong, errors, stop = [], [], threading.Event()

    def load():
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = pb_grpc.ReorderingScorerStub(channel)
            i = 0
            while not stop.is_set():
                k = i % len(sentences)
                try:
                    got = probabilities(stub.Score(score_request(sentences[k], "m"), timeout=30))
                    if not np.array_equal(got, expected[k]):
                        wrong.append(k)
                except grpc.RpcError as exc:
                    errors.append(exc.code())
                i += 1

    threads = [threading.Thread(target=load) for _ in range(2)]
    try:
        for t in threads:
            t.start()
        time.sleep(1.0)
        with open(served, "r+b") as f:  # truncate in place (same inode)
            f.truncate(served.stat().st_size // 2)
        time.sleep(1.0)
        shutil.copyfile(other, served)  # what `cp other.mrw ROOT/m/1/model.mrw` does
        time.sleep(1.5)  # several polls and many requests later
        stop.set()
        for t in threads:
            t.join(60)
        alive = server.proc.poll() is None
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            info = pb_grpc.ReorderingScorerStub(channel).GetModel(pb.GetModelRequest(model="m"), timeout=30)
    finally:
        stop.set()
        code = server.stop()
    assert alive, f"the server died (exit code {server.proc.returncode})"
    assert not wrong and not errors, (len(wrong), errors[:3])
    assert list(info.loaded_versions) == [1] and info.status[0].state == "LOADED"
    assert "changed on disk" in info.status[0].message
    assert "loaded_file_changed" in server.names() and code == 0


def test_serve_defaults_are_the_serve_options_defaults(repo_root):
    import argparse
    import dataclasses

    from server.commands import serve
    from server.options import ServeOptions

    parser = argparse.ArgumentParser()
    serve.register(parser.add_subparsers())
    args = parser.parse_args(["serve", "--models", str(repo_root)])
    shared = [f for f in dataclasses.fields(ServeOptions) if hasattr(args, f.name)]
    assert len(shared) >= 18  # every user-facing setting has a flag
    for f in shared:
        if f.default is not dataclasses.MISSING:
            assert getattr(args, f.name) == f.default, f.name
    assert ServeOptions(models=repo_root).host == "127.0.0.1"  # loopback unless told otherwise
