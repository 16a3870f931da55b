"""`moses-reorder serve` as a real process: start-up, several workers, SIGTERM drains.

Specification: the command logs JSON lines and a `listening` event with its port; with
--workers 2 both worker processes share the port (SO_REUSEPORT) and the supervisor's
/metrics aggregates them; SIGTERM lets requests already running finish with OK answers,
then the process exits 0.
"""

from __future__ import annotations

import json
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

from serverkit import free_port, model_path, probabilities, score_request, subprocess_env, write_test_model
from server.api import pb, pb_grpc


class ServeProcess:
    """`python -m training.cli serve ...` with its stderr parsed as JSON lines."""

    def __init__(self, root: Path, *extra: str):
        argv = [sys.executable, "-m", "training.cli", "serve", "--models", str(root), "--host", "127.0.0.1",
                "--port", "0", "--poll-seconds", "0", *extra]
        self.proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=subprocess_env())
        self.events: list[dict] = []
        self._listening = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._listening.wait(120):
            self.proc.kill()
            raise AssertionError(f"server never logged 'listening': {self.events}")
        self.port = next(e["port"] for e in self.events if e.get("event") == "listening")

    def _read(self) -> None:
        for line in self.proc.stderr:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = {"event": "non-json-line", "line": line.rstrip()}
            self.events.append(event)
            if event.get("event") == "listening":
                self._listening.set()

    def names(self) -> list[str]:
        return [e.get("event") for e in self.events]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(10)
        return code


def _tiled(request: pb.ScoreRequest, times: int) -> pb.ScoreRequest:
    """The request's pairs repeated `times` times (offsets shifted), built with numpy."""
    def arr(name):
        return np.array(getattr(request, name), dtype=np.int64)

    n_pairs = len(request.span_start)
    tgt_off, al_off = arr("target_offsets"), arr("align_offsets")
    shifts = np.arange(times, dtype=np.int64)
    big = pb.ScoreRequest(model=request.model, token_bytes=request.token_bytes,
                          token_offsets=request.token_offsets, source=request.source)
    big.span_start.extend(np.tile(arr("span_start"), times).tolist())
    big.span_end.extend(np.tile(arr("span_end"), times).tolist())
    big.target_tokens.extend(np.tile(arr("target_tokens"), times).tolist())
    big.align_source.extend(np.tile(arr("align_source"), times).tolist())
    big.align_target.extend(np.tile(arr("align_target"), times).tolist())
    big.target_offsets.extend(
        [0] + (tgt_off[1:][None, :] + (shifts * tgt_off[-1])[:, None]).ravel().tolist())
    big.align_offsets.extend(
        [0] + (al_off[1:][None, :] + (shifts * al_off[-1])[:, None]).ravel().tolist())
    assert len(big.span_start) == n_pairs * times
    return big


def test_sigterm_drains_in_flight_requests(repo_root, corpus_keys, test_sentences):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    server = ServeProcess(repo_root, "--grace-seconds", "30", "--cache-size", "0")
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}",
                                        options=[("grpc.max_receive_message_length", 64 << 20)])
        stub = pb_grpc.ReorderingScorerStub(channel)
        small = score_request(test_sentences[0], "m")
        big = _tiled(small, 190_000 // len(small.span_start))
        started = time.monotonic()
        stub.Score(big, timeout=60)  # one alone, to size the wait before SIGTERM
        alone = time.monotonic() - started
        results, ended = [], []

        def call():
            try:
                results.append(stub.Score(big, timeout=60))
            except grpc.RpcError as exc:
                results.append(exc)
            ended.append(time.monotonic())

        threads = [threading.Thread(target=call) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(alone / 3)
        sigterm_at = time.monotonic()
        code = server.stop()
        for t in threads:
            t.join()
        channel.close()
    finally:
        server.stop()
    assert code == 0, server.events[-5:]
    assert all(isinstance(r, pb.ScoreResponse) for r in results), results
    assert all(len(r.probabilities) == len(big.span_start) * 6 for r in results)
    assert max(ended) > sigterm_at, "no request was in flight at SIGTERM: the test proved nothing"
    names = server.names()
    assert names.index("server_draining") < names.index("server_stopped")


def test_two_workers_share_the_port_and_aggregate_metrics(repo_root, corpus_keys, test_sentences):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    metrics_port = free_port()
    server = ServeProcess(repo_root, "--workers", "2", "--metrics-port", str(metrics_port))
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
    finally:
        code = server.stop()
    assert code == 0, server.events[-5:]
    assert server.names().count("server_stopped") == 3  # two workers and the supervisor


def test_bad_repository_root_is_a_clear_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "training.cli", "serve", "--models", str(tmp_path / "none"),
                           "--port", "0"], capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert proc.returncode == 3
    assert "--models" in proc.stderr and str(tmp_path / "none") in proc.stderr


@pytest.mark.parametrize("flag", ["--max-pairs", "--workers"])
def test_nonsense_limits_are_refused(repo_root, flag):
    proc = subprocess.run([sys.executable, "-m", "training.cli", "serve", "--models", str(repo_root),
                           flag, "0"], capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert proc.returncode == 3 and flag in proc.stderr
