"""The main job: aligned corpus -> store -> Moses table -> every family -> served models.

`moses-reorder pipeline` strings the other stages together so that one command turns
a corpus into a model repository that `moses-reorder serve` can load as it is, plus the
evaluation table that says which model to use. It owns no algorithm: extraction,
counting, training and scoring are the same functions the single-stage commands call.
Re-running it on the same corpus reuses the example store and publishes every model as
a new version (ROOT/<name>/<version+1>/), which a running server picks up; it never
deletes or overwrites what an earlier run wrote.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from training.errors import InputError
from training.modelfile.layout import MODEL_FILE, next_version, publish  # noqa: F401 (re-exported)

from training import defaults


@dataclass(frozen=True)
class CorpusFiles:
    src: Path
    tgt: Path
    align: Path

    @classmethod
    def locate(cls, corpus: Path, src_lang: str, tgt_lang: str) -> "CorpusFiles":
        files = cls(corpus / f"train.{src_lang}", corpus / f"train.{tgt_lang}", corpus / "train.align")
        for path in (files.src, files.tgt, files.align):
            if not path.is_file():
                raise InputError(f"corpus file missing (a corpus directory holds train.{src_lang}, "
                                 f"train.{tgt_lang} and train.align; see --src-lang/--tgt-lang)", path)
        return files


def ensure_store(files: CorpusFiles, store_dir: Path, extract_model: str, max_phrase_length: int,
                 log: Callable[[str], None]) -> None:
    """Build the store, or reuse it if it holds this corpus, these settings and the labels."""
    from training.corpus.reading import plan_corpus
    from training.moses.extract import parse_models
    from training.store.build import build_store_from_files
    from training.store.examples import ExampleStore

    plan = plan_corpus(files.src, files.tgt, files.align)
    if (store_dir / "store.json").is_file():
        store = ExampleStore.open(store_dir)
        same_corpus = (store.meta.get("corpus") or {}).get("sha256") == plan.fingerprint["sha256"]
        same_length = (store.meta.get("settings") or {}).get("max_phrase_length") == max_phrase_length
        if same_corpus and same_length and extract_model in store.models:
            log(f"reusing the example store {store_dir} (same corpus and settings)")
            return
        raise InputError("holds an example store of another corpus or other settings; "
                         "choose another --out or remove it", store_dir)
    log(f"extracting {plan.n_sentences:,} sentence pairs ({extract_model}) into {store_dir}")
    build_store_from_files(files.src, files.tgt, files.align, parse_models([extract_model]), store_dir,
                           max_phrase_length=max_phrase_length, progress=sys.stderr.isatty(), jobs=defaults.JOBS)


def run_pipeline(corpus: Path = defaults.EMBEDDED_CORPUS, out: Path = Path(defaults.PIPELINE_OUT), *,
                 src_lang: str = defaults.SRC_LANG, tgt_lang: str = defaults.TGT_LANG,
                 moses_type: str = defaults.MOSES_TYPE, features: str = defaults.FEATURES,
                 families: list[str] | None = None, name: str | None = None,
                 max_phrase_length: int = defaults.MAX_PHRASE_LENGTH,
                 heldout_fraction: float = defaults.HELDOUT_FRACTION,
                 log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every stage; returns the rows of the evaluation table and where things went."""
    from training.eval.report import study_table
    from training.eval.studies import run_experiment
    from training.families import FAMILIES
    from training.moses.table import build_table
    from training.moses.types import MosesType
    from training.store.examples import ExampleStore

    mtype = MosesType.parse(moses_type)
    families = list(FAMILIES) if families is None else families
    name = name or corpus.resolve().name
    files = CorpusFiles.locate(corpus, src_lang, tgt_lang)
    out.mkdir(parents=True, exist_ok=True)
    store_dir = out / "store"
    ensure_store(files, store_dir, mtype.extract_model, max_phrase_length, log)

    table = out / f"reordering-table.{mtype}.gz"
    log(f"pipeline: Moses lexicalized table -> {table}")
    build_table(ExampleStore.open(store_dir), mtype, table)

    runs = out / "runs"
    rows = run_experiment(store_dir, runs, families=families, feature_sets=[features],
                          moses_type=str(mtype), heldout_fraction=heldout_fraction, log=log)
    models_root = out / "models"
    for row in rows:
        row["published"] = str(publish(Path(row["model"]), models_root, f"{name}-{row['family']}"))
    shutil.rmtree(runs, ignore_errors=True)

    header = (f"Held-out: last {heldout_fraction:g} of the sentences of {corpus}; {mtype}, "
              f"{rows[0]['direction']} direction; time = training seconds\n\n")
    report = header + study_table(rows, list(mtype.classes)) + "\n"
    (out / "report.md").write_text(report, encoding="utf-8")
    return {"rows": rows, "report": report, "models_root": str(models_root), "table": str(table),
            "store": str(store_dir)}


def run_corpus_experiment(corpus: Path, work: Path, *, families: list[str], feature_sets: list[str],
                          moses_type: str = defaults.EXPERIMENT_TYPE, src_lang: str = defaults.SRC_LANG,
                          tgt_lang: str = defaults.TGT_LANG, threshold: int | None = None,
                          heldout_fraction: float = defaults.HELDOUT_FRACTION,
                          params: dict[str, dict[str, Any]] | None = None,
                          log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """`experiment`: the corpus's store (built or reused under WORK/store), then every
    family x feature set trained into WORK/models and evaluated (eval.studies.run_experiment)."""
    from training.eval.studies import run_experiment
    from training.moses.types import MosesType

    mtype = MosesType.parse(moses_type)
    store = work / "store"
    work.mkdir(parents=True, exist_ok=True)
    ensure_store(CorpusFiles.locate(corpus, src_lang, tgt_lang), store, mtype.extract_model,
                 defaults.MAX_PHRASE_LENGTH, log)
    return run_experiment(store, work / "models", families=families, feature_sets=feature_sets,
                          moses_type=moses_type, threshold=threshold, heldout_fraction=heldout_fraction,
                          params=params, log=log)
