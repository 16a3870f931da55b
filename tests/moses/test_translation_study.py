"""benchmarks/translation.py's parts that need no Moses: the ini each system decodes with
(from a real filtered moses.ini) and the plan's order (a held-out decode never before the run whose weights it uses)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("translation_study", ROOT / "benchmarks" / "translation.py")
study_mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = study_mod          # its dataclasses look their module up
spec.loader.exec_module(study_mod)

DATA = Path(__file__).parent / "data"


@pytest.fixture()
def study(tmp_path, embedded_dir):
    work = tmp_path / "work"
    (work / "corpus").mkdir(parents=True)      # the sparse features' word lists come from train.*
    for lang in ("ja", "en"):
        (work / "corpus" / f"train.{lang}").write_bytes((embedded_dir / f"train.{lang}").read_bytes())
    (work / "filtered" / "dev").mkdir(parents=True)
    text = (DATA / "filtered.moses.ini").read_text(encoding="utf-8").replace("WORK", str(work))
    (work / "filtered" / "dev" / "moses.ini").write_text(text, encoding="utf-8")
    args = argparse.Namespace(moses=str(tmp_path / "moses"), corpus=str(tmp_path / "corpus"), work=str(work),
                              heldout=5000, port=50999, best="svm-S6")
    return study_mod.Study(args)


def ini(study, name: str) -> dict[str, list[str]]:
    return study_mod.read_ini(study.system_ini(study_mod.SYSTEMS[name], "dev"))


def test_each_system_changes_only_its_reordering_lines(study):
    lexical = ini(study, "lexical")
    assert lexical["distortion-limit"] == ["6"]
    assert any(l.startswith("LexicalReordering name=LexicalReordering0") for l in lexical["feature"])

    none = ini(study, "none")
    assert not any("Reordering" in l for l in none["feature"] + none["weight"])

    external = ini(study, "svm-S6")
    line = next(l for l in external["feature"] if "Reordering" in l)
    assert line.startswith("ExternalReordering name=LexicalReordering0 num-features=6")
    assert "server=127.0.0.1:50999" in line and "model=svm-S6" in line
    assert external["weight"] == lexical["weight"]          # same starting point for tuning


def test_every_system_at_limit_12_changes_the_limit_and_nothing_else(study):
    for plain_system in study_mod.AT_DEFAULT_LIMIT:
        name = f"{plain_system.name}-dl12"
        probe, plain = ini(study, name), ini(study, plain_system.name)
        assert probe["distortion-limit"] == ["12"] and plain["distortion-limit"] == ["6"]
        assert {k: v for k, v in probe.items() if k != "distortion-limit"} == \
               {k: v for k, v in plain.items() if k != "distortion-limit"}, name
        # the same served model; compared with Lexical at the same limit (Lexical: with Lexical at 6)
        system = study_mod.SYSTEMS[name]
        if system.kind == "external":
            assert study_mod.model_name(system) == study_mod.model_name(plain_system)
        assert system.baseline == ("lexical" if name == "lexical-dl12" else "lexical-dl12")


def test_beside_the_table_keeps_the_table_and_adds_its_own_weights(study):
    both = ini(study, "svm-S6+lexical-dl12")
    assert both["distortion-limit"] == ["12"]
    reordering = [l for l in both["feature"] if "Reordering" in l]
    assert reordering[0].startswith("LexicalReordering name=LexicalReordering0")
    assert reordering[1].startswith("ExternalReordering name=ExternalReordering0 num-features=6")
    weights = {l.split("=")[0]: l.split("=")[1].split() for l in both["weight"]}
    assert weights["ExternalReordering0"] == weights["LexicalReordering0"] and len(weights["LexicalReordering0"]) == 6


def test_plan_runs_held_out_decodes_after_their_tuning_runs():
    jobs = study_mod.plan("svm-S6")
    keys = [j.key for j in jobs]
    assert len(keys) == len(set(keys))
    for i, job in enumerate(jobs):
        if job.kind == "heldout":
            assert f"tune:{job.system}:{job.method}{job.run}" in keys[:i], job.key
    assert {j.system for j in jobs} == set(study_mod.SYSTEMS)


def test_no_instance_attribute_hides_a_method(study):
    # Session 8: an attribute named like the decode method made every decode fail at run time.
    hidden = [name for name in vars(study) if callable(getattr(type(study), name, None))]
    assert hidden == []
