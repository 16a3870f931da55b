"""server.local: the one helper that runs `moses-reorder serve` for tests and benchmarks.

Specification: it starts the real command on a free loopback port, returns once the
health service answers SERVING, stops it with SIGTERM (exit 0), and a restart comes back
on the same port; a bad option is refused before any process starts; a server that exits
during start-up is an error that shows its log; a model published after start-up can be
waited for by name.
"""

from __future__ import annotations

import pytest
from grpc_health.v1 import health_pb2

from serverkit import model_path, write_test_model
from server.healthcheck import check
from server.local import LocalServer, local_server
from training.errors import UsageError


def test_start_serving_stop_and_restart_on_the_same_port(repo_root, corpus_keys, tmp_path):
    write_test_model(model_path(repo_root, "m", 1), corpus_keys)
    with local_server(repo_root, threads=2, log=tmp_path / "serve.log") as served:
        assert served.port > 0 and served.address == f"127.0.0.1:{served.port}"
        assert check(served.address, "m") == (True, health_pb2.HealthCheckResponse.ServingStatus.Name(1))
        port = served.port
        assert served.stop() == 0
        assert served.names()[-1] == "server_stopped"
        assert not check(served.address, "m", timeout=1)[0]
        served.start()
        assert served.port == port and check(served.address, "m")[0]
    assert served.proc.returncode == 0
    assert (tmp_path / "serve.log").read_text().count('"listening"') == 2  # its log is the caller's to keep


def test_a_bad_option_is_refused_before_a_process_starts(repo_root):
    with pytest.raises(UsageError, match="--threads=0"):
        LocalServer(repo_root, threads=0)
    with pytest.raises(ValueError, match="log_level"):
        LocalServer(repo_root, log_level="warning")  # the port would be unknown


def test_a_server_that_exits_during_start_up_shows_its_log(tmp_path):
    with pytest.raises(RuntimeError, match="exited with 3") as failed:
        with local_server(tmp_path / "missing"):
            pass
    assert "--models" in str(failed.value)  # serve's own message, from its log


def test_a_model_published_later_is_waited_for_by_name(repo_root, corpus_keys):
    with local_server(repo_root, service=None, poll_seconds=0.1) as served:
        assert not check(served.address)[0]  # nothing loaded yet
        write_test_model(model_path(repo_root, "late", 1), corpus_keys)
        served.wait_serving("late", timeout=60)
        assert check(served.address, "late")[0]
