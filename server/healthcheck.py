"""A gRPC health probe: exit 0 if the server answers SERVING for a service, 1 otherwise.

Used by the container's HEALTHCHECK (docker/Dockerfile) and handy for scripts: it asks
the standard grpc.health.v1 service, overall ("") or for one model name, exactly like
grpc_health_probe would. It must stay a stock health client: no project RPCs here.

    python -m server.healthcheck --address 127.0.0.1:50051 [--service MODEL] [--timeout 3]
"""

from __future__ import annotations

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def check(address: str, service: str = "", timeout: float = 3.0) -> tuple[bool, str]:
    """(serving?, what the server said or why it could not be asked)."""
    try:
        with grpc.insecure_channel(address) as channel:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.RpcError as exc:
        return False, f"{exc.code().name}: {exc.details()}"
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    return response.status == health_pb2.HealthCheckResponse.SERVING, name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.healthcheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--service", default="", help="a model name; empty = the whole server")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds")
    args = parser.parse_args(argv)
    ok, said = check(args.address, args.service, args.timeout)
    print(f"{args.address} {args.service or '(server)'}: {said}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
