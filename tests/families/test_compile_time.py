"""A model's training time leaves numba's one-time compiling out (issue 47: on a cold run the
report's Time for svm was 7.8 s against 1.6 s warm, most of it compiling). The compiling is
recorded apart, as training.compile_seconds."""

from __future__ import annotations

from contextlib import contextmanager

import training.api.train as train_api
from training.api import train_model
from training.jitcache import CompileClock

HOUR = 3600.0


def test_the_training_time_leaves_the_compiling_out(small_store, tmp_path, monkeypatch) -> None:
    @contextmanager
    def an_hour_of_compiling():  # a clock that says numba compiled for an hour during the fit
        clock = CompileClock()
        yield clock
        clock.seconds = HOUR

    monkeypatch.setattr(train_api, "compiling", an_hour_of_compiling)
    meta = train_model(small_store, family="nb-map", moses_type="hier-msd-bidirectional-fe", features="S6",
                       out=tmp_path / "m.mrw")
    training = meta["training"]
    assert training["compile_seconds"] == HOUR
    assert -HOUR < training["train_seconds"] < -HOUR + 600  # the fit's seconds less the hour
