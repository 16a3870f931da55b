"""Helpers for the server tests: real model files, a real server on a loopback port.

Models are written with the real model writer (training.modelfile.model.write_model) over real
feature keys: the keys come from training.features.templates.extract_keys on phrase pairs of the
first sentences of ja-en train (word pairs read off the real alignment), so a request
built from ja-en sentences hits real rows. Requests are built with
training.modelfile.request.arrays_from_strings, and expected scores come from loading the same file
with training.modelfile.model.load_model and scoring locally: the server must answer exactly that.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np

from server.api import pb, pb_grpc
from server.app import ScoringServer, ServeOptions
from server.local import LocalServer, free_port  # noqa: F401 (free_port: for the tests)
from training.features.templates import extract_keys
from training.features.spec import FeatureSpec
from training.modelfile.layout import MODEL_FILE
from training.modelfile.model import load_model, write_model
from training.modelfile.request import arrays_from_strings, batch_from_request_arrays

N_TRAIN = 300
FEATURES = "S7"  # context size 1 + boundaries + alignments: several templates per pair


@dataclass(frozen=True)
class Sentence:
    source: list[str]
    pairs: list[tuple[int, int, list[str], list[tuple[int, int]]]]


def _read_lines(path: Path, n: int) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(n)]


def sentences(ja_en_dir: Path, split: str, n: int) -> list[Sentence]:
    """Word pairs and two-word source spans with their aligned target words, from real data."""
    ja = _read_lines(ja_en_dir / f"{split}.ja", n)
    en = _read_lines(ja_en_dir / f"{split}.en", n)
    align_path = ja_en_dir / f"{split}.align"
    align = _read_lines(align_path, n) if align_path.exists() else [""] * n
    out = []
    for s, t, a in zip(ja, en, align):
        src, tgt = s.split(), t.split()
        points = [tuple(map(int, p.split("-"))) for p in a.split()]
        pairs = []
        for i, j in points:
            pairs.append((i, i + 1, [tgt[j]], [(0, 0)]))
        if not points:  # test split has no alignment: pair each source word with a target word
            for i in range(len(src)):
                k = min(i, len(tgt) - 1)
                pairs.append((i, i + 1, [tgt[k]], [(0, 0)]))
                if i + 2 <= len(src):
                    two = tgt[k:k + 2]
                    pairs.append((i, i + 2, two, [(0, 0), (1, len(two) - 1)]))
        out.append(Sentence(src, pairs))
    return out


def keys_of(train_sentences: list[Sentence]) -> np.ndarray:
    """Every feature key the sentences' pairs produce (sorted, unique)."""
    spec = FeatureSpec.parse(FEATURES)
    keys = []
    for s in train_sentences:
        _, k = extract_keys(batch_from_request_arrays(**arrays_from_strings(s.source, s.pairs)), spec)
        keys.append(k)
    return np.unique(np.concatenate(keys))


def write_test_model(path: Path, keys: np.ndarray, *, moses_type: str = "hier-msd-bidirectional-fe",
                     seed: int = 0, family: str = "maxent", features: str = FEATURES) -> Path:
    """A model file over real feature keys with seeded weights (distinct per seed)."""
    from training.moses.types import MosesType

    n_out = len(MosesType.parse(moses_type).outputs)
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_model(path, family=family, moses_type=moses_type, keys=keys,
                weights=rng.normal(0, 1, size=(keys.shape[0], n_out)).astype(np.float32),
                bias=rng.normal(0, 0.1, size=n_out).astype(np.float32), features=features, threshold=0,
                trainer="tests/server fixture (seeded weights over real keys)")
    return path


def model_path(root: Path, name: str, version: int) -> Path:
    return root / name / str(version) / MODEL_FILE


def score_request(sentence: Sentence, model: str, version: int = 0) -> pb.ScoreRequest:
    return pb.ScoreRequest(model=model, version=version, **arrays_from_strings(sentence.source, sentence.pairs))


def expected_scores(path: Path, sentence: Sentence) -> np.ndarray:
    """What the model file itself says for the sentence: the server must answer exactly this."""
    return load_model(path).predict_proba(
        batch_from_request_arrays(**arrays_from_strings(sentence.source, sentence.pairs)))


def probabilities(response: pb.ScoreResponse) -> np.ndarray:
    return np.array(response.probabilities, dtype=np.float32).reshape(-1, len(response.outputs))


def tiled_request(request: pb.ScoreRequest, times: int) -> pb.ScoreRequest:
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


def score_while_stopping(address: str, request: pb.ScoreRequest, stop: Callable[[], object], *, calls: int,
                         timeout: float) -> tuple[list, float, float]:
    """Stop a server while requests run: score REQUEST once alone (to time it), then send CALLS
    copies at once and call STOP a third of that time later. Returns (each answer or RpcError,
    when STOP was called, when the last answer came): a drain test checks that every answer
    is OK and that the last came after STOP (or nothing was in flight and it proved nothing)."""
    channel = grpc.insecure_channel(address, options=[("grpc.max_receive_message_length", 64 << 20)])
    stub = pb_grpc.ReorderingScorerStub(channel)
    started = time.monotonic()
    stub.Score(request, timeout=timeout)
    alone = time.monotonic() - started
    results, ended = [], []

    def call():
        try:
            results.append(stub.Score(request, timeout=timeout))
        except grpc.RpcError as exc:
            results.append(exc)
        ended.append(time.monotonic())

    threads = [threading.Thread(target=call) for _ in range(calls)]
    for t in threads:
        t.start()
    time.sleep(alone / 3)
    stop_at = time.monotonic()
    stop()
    for t in threads:
        t.join()
    channel.close()
    return results, stop_at, max(ended)


@dataclass
class Running:
    server: ScoringServer
    channel: grpc.Channel
    stub: pb_grpc.ReorderingScorerStub
    address: str


@contextlib.contextmanager
def running_server(root: Path, **options) -> Iterator[Running]:
    opts = dict(models=root, host="127.0.0.1", port=0, poll_seconds=0, threads=4)
    opts.update(options)
    server = ScoringServer(ServeOptions(**opts))
    port = server.start()
    address = f"127.0.0.1:{port}"
    channel = grpc.insecure_channel(address)
    try:
        yield Running(server, channel, pb_grpc.ReorderingScorerStub(channel), address)
    finally:
        channel.close()
        server.stop(0)


def serve_process(root: Path, **settings) -> LocalServer:
    """`moses-reorder serve` as a real process on a free loopback port, started and SERVING
    (server.local; `settings`: ServeOptions fields and LocalServer's own), its log beside
    ROOT. No polling unless asked: a test says when the repository changes."""
    log = Path(tempfile.mkstemp(prefix="serve-", suffix=".log", dir=root.parent)[1])
    return LocalServer(root, **{"poll_seconds": 0, "log": log, **settings}).start()


def subprocess_env() -> dict[str, str]:
    """The test's environment; the project root on PYTHONPATH unless the caller set one."""
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    return env


def self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """A fresh self-signed certificate for localhost/127.0.0.1/::1 and its key (PEM files),
    made with `cryptography`: the server's --tls-cert/--tls-key and the clients' root CA."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.IPAddress(ipaddress.ip_address("::1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "server.crt", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def listening_address(port: int) -> str:
    """The local address a TCP socket listens on for `port` (from /proc/net/tcp and tcp6),
    e.g. "127.0.0.1" or "0.0.0.0" or "::"; "" if none."""
    import ipaddress

    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        with open(table) as f:
            next(f)
            for line in f:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A = LISTEN
                    raw = bytes.fromhex(address)
                    # the kernel prints each 32-bit word in host (little-endian) order
                    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                    address = ipaddress.ip_address(raw)
                    mapped = getattr(address, "ipv4_mapped", None)  # gRPC listens on ::ffff:127.0.0.1
                    return str(mapped or address)
    return ""
