"""Building and running the serving image (docker/Dockerfile) with the docker CLI.

Used by tests/docker and benchmarks/container_startup.py. Every container runs with
`--network host` and serves on 127.0.0.1: Docker's bridge network (its private 172.17.0.0/16
addresses) must never be used on these machines, so no helper here can ask for it.

The image is built from a wheelhouse made on the host (docker/wheelhouse), so the build
needs no network and no TLS trust inside the build container (../shared/CONTAINER-NOTES.md).
The base image is $MOSES_REORDER_DOCKER_BASE, else python:3.11-slim; docker/local-base.sh
makes a stand-in from Debian packages where no registry is reachable.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = ROOT / "docker" / "wheelhouse"
DEFAULT_BASE = "python:3.11-slim"


def base_image() -> str:
    return os.environ.get("MOSES_REORDER_DOCKER_BASE") or DEFAULT_BASE


def docker(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    """`docker ARGS` with its output captured; CalledProcessError carries stderr when `check`."""
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result


def unavailable() -> str | None:
    """Why no image can be built and run here (no docker CLI, no daemon, no base image), or None."""
    if shutil.which("docker") is None:
        return "no docker CLI on PATH (install docker.io; .ci/run does)"
    try:
        info = docker("info", "--format", "{{.ServerVersion}}", timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return "the Docker daemon did not answer `docker info` within 30 s"
    if info.returncode != 0 or not info.stdout.strip():
        return f"no Docker daemon is reachable ({(info.stderr.strip().splitlines() or ['docker info failed'])[-1]})"
    base = base_image()
    if docker("image", "inspect", base, check=False, timeout=60).returncode != 0:
        pulled = docker("pull", base, check=False, timeout=300)
        if pulled.returncode != 0:
            return (f"base image {base} is neither local nor pullable (make one with docker/local-base.sh "
                    "and set MOSES_REORDER_DOCKER_BASE)")
    return None


def build_wheelhouse(spec: str = ".") -> float:
    """`pip wheel -w docker/wheelhouse SPEC setuptools wheel` from the repository root (SPEC "."
    or ".[train]"): the dependencies and the build backend the image installs the project with
    (its own wheel is rebuilt too, and left out of the image's context). Returns seconds."""
    WHEELHOUSE.mkdir(exist_ok=True)
    for old in WHEELHOUSE.glob("moses_reorder-*.whl"):
        old.unlink()
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
                    "-w", str(WHEELHOUSE), spec, "setuptools>=68", "wheel"], cwd=ROOT, check=True, timeout=1800)
    return time.monotonic() - started


def build_image(tag: str, context: Path = ROOT, **build_args: str) -> float:
    """docker build (host network, base from base_image()) of docker/Dockerfile; seconds taken."""
    return build_image_log(tag, context, **build_args)[0]


def build_image_log(tag: str, context: Path = ROOT, **build_args: str) -> tuple[float, str]:
    """build_image, and the builder's output (which steps came from the layer cache)."""
    args = ["build", "--network", "host", "--build-arg", f"BASE={base_image()}", "-f", "docker/Dockerfile",
            "-t", tag]
    for name, value in build_args.items():
        args += ["--build-arg", f"{name}={value}"]
    started = time.monotonic()
    result = subprocess.run(["docker", *args, str(context)], capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise AssertionError(f"docker build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return time.monotonic() - started, result.stdout + result.stderr


@dataclass(frozen=True)
class Step:
    text: str     # the Dockerfile instruction, as the builder echoes it
    cached: bool  # taken from the layer cache


def build_steps(log: str) -> list[Step]:
    """The steps of a build log: the legacy builder's ("Step 3/20 : RUN ..." then " ---> Using
    cache") or BuildKit's plain progress ("#7 [build 3/9] RUN ..." then "#7 CACHED")."""
    steps: list[list] = []
    by_vertex: dict[str, list] = {}
    for line in log.splitlines():
        legacy = re.match(r"Step \d+/\d+ : (.*)", line)
        vertex = re.match(r"#(\d+) \[[^\]]*\d+/\d+\] (.*)", line)
        if legacy or vertex:
            step = [(legacy or vertex).groups()[-1], False]
            steps.append(step)
            if vertex:
                by_vertex[vertex.group(1)] = step
        elif "Using cache" in line and steps:
            steps[-1][1] = True
        elif (cached := re.match(r"#(\d+) CACHED", line)) and cached.group(1) in by_vertex:
            by_vertex[cached.group(1)][1] = True
    return [Step(text, cached) for text, cached in steps]


def remove_image(tag: str) -> None:
    """The image and the untagged build stages docker/Dockerfile left behind (its build label)."""
    docker("rmi", "--force", tag, check=False)
    docker("image", "prune", "--force", "--filter", "label=moses-reorder.stage=build", check=False)


def image_size(tag: str) -> int:
    """The image's size in bytes, as `docker images` counts it (every layer, base included)."""
    return int(docker("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())


def run_server(tag: str, models: Path, port: int, *serve_args: str, env: dict[str, str] | None = None,
               name: str | None = None, run_args: tuple[str, ...] = ()) -> str:
    """Start the image's `serve` over MODELS (mounted read-only at /models) on 127.0.0.1:PORT
    with the host's network (RUN_ARGS: more `docker run` options); return the container id."""
    args = ["run", "--detach", "--network", "host", "--volume", f"{models}:/models:ro",
            "--env", f"MOSES_REORDER_PORT={port}", *run_args]
    for key, value in (env or {}).items():
        args += ["--env", f"{key}={value}"]
    if name:
        args += ["--name", name]
    args += [tag, "--models", "/models", "--host", "127.0.0.1", "--port", str(port), *serve_args]
    return docker(*args, timeout=120).stdout.strip()


def remove(container: str) -> None:
    docker("rm", "--force", container, check=False, timeout=120)


def health(address: str, timeout: float = 1.0) -> str:
    """The grpc.health.v1 status name of the server (overall), or the RPC's error code name."""
    with grpc.insecure_channel(address) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
        except grpc.RpcError as exc:
            return exc.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)


def wait_serving(address: str, container: str | None = None, limit: float = 180.0, step: float = 0.05) -> float:
    """Seconds until ADDRESS answers SERVING (polled every STEP); AssertionError after LIMIT,
    or at once if CONTAINER exited, with its log."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if health(address, timeout=step * 10) == "SERVING":
            return time.monotonic() - started
        if container and docker("inspect", "--format", "{{.State.Running}}", container).stdout.strip() != "true":
            break
        time.sleep(step)
    log = docker("logs", container, check=False).stderr[-3000:] if container else ""
    raise AssertionError(f"{address} not SERVING after {time.monotonic() - started:.1f} s\n{log}")
