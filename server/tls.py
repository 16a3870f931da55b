"""The server's TLS certificate and key, checked before gRPC sees them.

gRPC takes any bytes as a certificate and key and fails only when it binds the port, with
nothing but a zero port number: a garbage or mismatched `--tls-key` used to be reported
as "address in use". So both files are read and checked here with the standard library's
OpenSSL binding, and a bad one is an InputError naming the flag, the file and the reason.
Stdlib only: the serve command's supervisor checks the files before it starts workers.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from training.errors import InputError

_KEY_MARKERS = (b"-----BEGIN PRIVATE KEY-----", b"-----BEGIN RSA PRIVATE KEY-----",
                b"-----BEGIN EC PRIVATE KEY-----")


def _read(flag: str, path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {exc.strerror or exc} ({flag})", path) from None


def _refuse_password() -> bytes:
    raise ValueError("encrypted")


def read_tls_pair(cert: Path, key: Path) -> tuple[bytes, bytes]:
    """(certificate chain PEM, private key PEM) once both parse and belong together."""
    cert_pem, key_pem = _read("--tls-cert", cert), _read("--tls-key", key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_verify_locations(cadata=cert_pem.decode("ascii", "replace"))
    except ssl.SSLError as exc:
        raise InputError(f"not a PEM certificate ({exc.reason or exc.library}) (--tls-cert)", cert) from None
    if b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in key_pem or b"Proc-Type: 4,ENCRYPTED" in key_pem:
        raise InputError("the private key is encrypted; give it unencrypted (--tls-key)", key)
    if not any(marker in key_pem for marker in _KEY_MARKERS):
        raise InputError("not a PEM private key (no BEGIN ... PRIVATE KEY block) (--tls-key)", key)
    try:
        context.load_cert_chain(cert, key, password=_refuse_password)
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise InputError(f"this private key does not belong to the certificate {cert} (--tls-key)",
                             key) from None
        raise InputError(f"cannot use this private key with the certificate ({exc.reason or exc}) (--tls-key)",
                         key) from None
    except (ValueError, OSError) as exc:
        raise InputError(f"cannot use this private key ({exc}) (--tls-key)", key) from None
    return cert_pem, key_pem
