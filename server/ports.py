"""Is a port free, and reserving one for several worker processes: checked by us, before gRPC binds.

gRPC reports a busy port with a raw C-core log line on stderr (`E1123 ... add_port.cc`)
and a zero port number; and with SO_REUSEPORT set (the multi-worker mode) the kernel
lets a second server *join* a port that another multi-worker server of the same user
already holds, so a stale server silently answers part of the requests. So every
server first probes the address itself with a plain socket that does NOT set
SO_REUSEPORT: that bind fails while anyone else holds the port, reuse-port group or not.
The probe sets SO_REUSEADDR like gRPC's own listener, so connections of a server that
just stopped (TIME_WAIT) do not block a restart.

The supervisor then keeps the port with a bound (never listening) SO_REUSEPORT socket
for its workers. Between its probe and that bind another server could slip in; two
moses-reorder supervisors starting at once are serialised by an flock on a per-port lock
file (in the temp directory, removed when the reservation is made), so the second one's probe
sees the first one's reservation.

Stdlib only: server/commands/serve.py imports this in the supervisor, which never loads gRPC.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

from training.errors import AddressError, InputError


def _addresses(host: str, port: int) -> list[tuple]:
    """(family, sockaddr) of every address `host` stands for (localhost: both loopbacks)."""
    bare = host.strip("[]")
    try:
        infos = socket.getaddrinfo(bare or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise AddressError(f"cannot listen on {host}:{port}: {exc.strerror} (--host)") from None
    seen, out = set(), []
    for family, _, _, _, sockaddr in infos:
        key = (family, sockaddr[0])
        if key not in seen:
            seen.add(key)
            out.append((family, sockaddr))
    return out


def _bind(family: int, sockaddr: tuple, *, reuse_port: bool, reuse_addr: bool) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if reuse_addr:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 0:
                raise InputError("this system does not support SO_REUSEPORT; run one process per port "
                                 "(--port-per-worker) instead")
        sock.bind(sockaddr)
    except BaseException:
        sock.close()
        raise
    return sock


def check_port_free(host: str, port: int) -> None:
    """AddressError naming --host/--port if `port` is in use on an address of `host`, or if
    no address of `host` can be bound at all (not local). Like gRPC, an address that
    cannot exist here (e.g. ::1 of "localhost" with IPv6 off) is skipped while another
    one binds. Port 0 (let the system pick) is always free.
    """
    if port == 0:
        return
    failures = []
    addresses = _addresses(host, port)
    for family, sockaddr in addresses:
        try:
            _bind(family, sockaddr, reuse_port=False, reuse_addr=True).close()
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise AddressError(f"cannot listen on {host}:{port}: address already in use (--host/--port)") from None
            failures.append(exc.strerror or str(exc))
    if len(failures) == len(addresses):
        raise AddressError(f"cannot listen on {host}:{port}: {failures[0]} (--host/--port)")


@contextlib.contextmanager
def _port_lock(port: int) -> Iterator[None]:
    """Hold the port's lock file while probing and reserving; the holder removes the file
    before unlocking, so none is left behind. A waiter that then locks a removed file (its
    inode no longer at the path) opens the path again."""
    path = Path(tempfile.gettempdir()) / f"moses-reorder-port-{port}.lock"
    while True:
        f = open(path, "a")
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            same = path.stat().st_ino == os.fstat(f.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        f.close()
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        f.close()  # releases the lock


def reserve_shared_port(host: str, port: int) -> socket.socket:
    """A bound, non-listening SO_REUSEPORT socket holding `port` for this server's workers.

    Refuses (AddressError naming --host/--port) a port that anyone already holds, including
    another multi-worker server; port 0 reserves a free port (read it with getsockname()).
    """
    addresses = _addresses(host, port)
    family, sockaddr = addresses[0]
    if port == 0:
        return _reserve(host, port, family, sockaddr)
    with _port_lock(port):
        check_port_free(host, port)
        return _reserve(host, port, family, sockaddr)


def _reserve(host: str, port: int, family: int, sockaddr: tuple) -> socket.socket:
    try:
        return _bind(family, sockaddr, reuse_port=True, reuse_addr=False)
    except OSError as exc:
        raise AddressError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (--host/--port)") from None
