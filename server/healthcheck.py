"""A gRPC health probe: exit 0 if the server answers SERVING for a service, 1 otherwise.

Used by the container's HEALTHCHECK (docker/Dockerfile) and handy for scripts: it asks
the standard grpc.health.v1 service, overall ("") or for one model name, exactly like
grpc_health_probe would. It must stay a stock health client: no project RPCs here.

    python -m server.healthcheck --address 127.0.0.1:50051 [--service MODEL] [--timeout 3] [--tls-ca CA.pem]
"""

from __future__ import annotations

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def _channel(address: str, tls_ca: str | None) -> grpc.Channel:
    if tls_ca is None:
        return grpc.insecure_channel(address)
    with open(tls_ca, "rb") as f:
        return grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=f.read()))


def check(address: str, service: str = "", timeout: float = 3.0, tls_ca: str | None = None) -> tuple[bool, str]:
    """(serving?, what the server said or why it could not be asked); `tls_ca` = a PEM file
    of root certificates to speak TLS with (a server started with --tls-cert)."""
    try:
        with _channel(address, tls_ca) as channel:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.RpcError as exc:
        return False, f"{exc.code().name}: {exc.details()}"
    except OSError as exc:
        return False, f"cannot read --tls-ca {tls_ca}: {exc.strerror or exc}"
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    return response.status == health_pb2.HealthCheckResponse.SERVING, name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.healthcheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--service", default="", help="a model name; empty = the whole server")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds")
    parser.add_argument("--tls-ca", default=None, help="PEM root certificates: speak TLS (server run with --tls-cert)")
    args = parser.parse_args(argv)
    ok, said = check(args.address, args.service, args.timeout, args.tls_ca)
    print(f"{args.address} {args.service or '(server)'}: {said}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
