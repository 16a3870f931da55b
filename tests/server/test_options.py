"""ServeOptions checks itself, and the command line is generated from its fields.

Specification: a server built in code refuses what `moses-reorder serve` refuses, with a
UsageError (exit 2) naming the flag, the value and the range, on both sides of every
bound (BOUNDS below is the specification, written apart from the declarations); the
flags `server.options.command_line` writes, parsed by the real `serve` parser, give back
the same options, so the supervisor's workers run with exactly its settings.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.commands.serve import _worker_argv, options_from_args
from server.options import NOT_ON_COMMAND_LINE, ServeOptions, command_line, flag
from training.cli import build_parser
from training.errors import UsageError

# name -> (lowest, highest or None, whole number?)
BOUNDS = {
    "port": (0, 65535, True), "workers": (1, None, True), "threads": (1, None, True),
    "max_concurrent_rpcs": (1, None, True), "poll_seconds": (0, None, False),
    "metrics_port": (1, 65535, True), "max_pairs": (1, None, True), "max_source_tokens": (1, None, True),
    "max_message_mb": (1, 2047, True), "max_align_points": (1, None, True), "max_keys": (1, None, True),
    "cache_size": (0, None, True), "cache_mb": (0, None, True), "keep_versions": (1, None, True),
    "grace_seconds": (0, None, False), "receive_timeout_seconds": (0.01, None, False),
}
NOT_NUMBERS = {"models", "host", "enable_admin", "metrics_host", "tls_cert", "tls_key", "reuse_port",
               "notify_reload"}
ROOT = Path("/nonexistent-models")  # values are checked, not the machine (serve checks files)


def test_every_field_is_specified_here():
    assert {f.name for f in dataclasses.fields(ServeOptions)} == set(BOUNDS) | NOT_NUMBERS


def _inside(name):
    low, high, whole = BOUNDS[name]
    if whole:
        return st.integers(low, high if high is not None else 10 ** 12)
    return st.floats(low, high, allow_nan=False, allow_infinity=False)


def _outside(name):
    low, high, whole = BOUNDS[name]
    below = st.integers(max_value=low - 1) if whole else st.floats(max_value=low, exclude_max=True,
                                                                    allow_nan=False)
    above = st.integers(min_value=high + 1) if high is not None else st.nothing()
    odd = st.sampled_from([math.nan, math.inf, True, "1"] + ([2.5] if whole else []))
    return below | above | odd


@pytest.mark.parametrize("name", sorted(BOUNDS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_each_bound_is_enforced_on_both_sides(name, data):
    value = data.draw(_inside(name), label="inside")
    assert getattr(ServeOptions(models=ROOT, **{name: value}), name) == value
    bad = data.draw(_outside(name), label="outside")
    with pytest.raises(UsageError) as refused:
        ServeOptions(models=ROOT, **{name: bad})
    message = str(refused.value)
    assert refused.value.exit_code == 2
    assert f"{flag(name)}={bad!r}" in message and "must be" in message, message


def test_tls_files_go_together():
    with pytest.raises(UsageError, match="--tls-cert and --tls-key go together"):
        ServeOptions(models=ROOT, tls_cert=Path("server.crt"))
    assert ServeOptions(models=ROOT, tls_cert=Path("c"), tls_key=Path("k")).tls_key == Path("k")


def _changed() -> ServeOptions:
    """Every field that a flag sets, away from its default."""
    return ServeOptions(models=ROOT, host="::1", port=50999, workers=3, threads=7, max_concurrent_rpcs=9,
                        poll_seconds=2.5, enable_admin=True, metrics_port=9101, metrics_host="127.0.0.2",
                        tls_cert=Path("/c.pem"), tls_key=Path("/k.pem"), max_pairs=11, max_source_tokens=12,
                        max_message_mb=13, max_align_points=14, max_keys=15, cache_size=16, cache_mb=17,
                        keep_versions=3, grace_seconds=0.5, reuse_port=True, receive_timeout_seconds=2.5)


def _parse(argv: list[str]):
    return build_parser().parse_args(["serve", *argv])


def test_the_command_line_gives_back_the_same_options():
    options = _changed()
    changed = {f.name for f in dataclasses.fields(ServeOptions)
               if getattr(options, f.name) != f.default} | {"models"}
    assert changed == {f.name for f in dataclasses.fields(ServeOptions)} - set(NOT_ON_COMMAND_LINE)
    assert options_from_args(_parse(command_line(options))) == options
    defaults = ServeOptions(models=ROOT)
    assert command_line(defaults) == ["--models", str(ROOT)]  # defaults are the parser's own
    assert options_from_args(_parse(command_line(defaults))) == defaults


def test_a_worker_runs_with_the_supervisors_options():
    parent = _parse([*command_line(_changed()), "--log-level", "warning"])
    argv = _worker_argv(parent, port=50123, ready_fd=7)
    assert argv[1:4] == ["-m", "training.cli", "serve"]
    worker = _parse(argv[4:])
    assert worker.worker_ready_fd == 7 and worker.log_level == "warning"
    expected = dataclasses.replace(_changed(), port=50123, workers=1, metrics_port=None, metrics_host=None,
                                   reuse_port=True)
    assert options_from_args(worker) == expected
    per_worker = _parse([*command_line(_changed()), "--port-per-worker"])
    assert not options_from_args(_parse(_worker_argv(per_worker, 50124, 7)[4:])).reuse_port
