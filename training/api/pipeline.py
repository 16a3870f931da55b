"""The main job: aligned corpus -> store -> Moses table -> every family -> served models.

`moses-reorder pipeline` strings the other stages together so that one command turns
a corpus into a model repository that `moses-reorder serve` can load as it is, plus the
evaluation table that says which model to use. It owns no algorithm: extraction,
counting, training and scoring are the same functions the single-stage commands call.
Re-running it on the same corpus reuses the example store and publishes every model as
a new version (ROOT/<name>/<version+1>/), which a running server picks up; it never
deletes or overwrites what an earlier run wrote.

Model selection and shipping follow scikit-learn's `GridSearchCV(refit=True)`: the
held-out sentences measure every family, then each is refit with the same settings on
all sentences, and the refit model is the one published (issue 34). The Moses table is
counted over all sentences too, so the served `lexical` model and the table are one
model. The evaluated models are kept in OUT/evaluated/ and the report says which
sentences every artifact saw. `refit=False` publishes the evaluated models instead.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from training.errors import InputError, UsageError
from training.modelfile.layout import SERVED_DIR, publish

from training import defaults


@dataclass(frozen=True)
class CorpusFiles:
    src: Path
    tgt: Path
    align: Path

    @classmethod
    def locate(cls, corpus: Path, src_lang: str, tgt_lang: str) -> "CorpusFiles":
        if corpus.exists() and not corpus.is_dir():
            raise UsageError(f"--corpus must be a directory (holding train.{src_lang}, train.{tgt_lang} and "
                             "train.align), not a file", corpus)
        files = cls(corpus / f"train.{src_lang}", corpus / f"train.{tgt_lang}", corpus / "train.align")
        for path in (files.src, files.tgt, files.align):
            if not path.is_file():
                raise InputError(f"corpus file missing (a corpus directory holds train.{src_lang}, "
                                 f"train.{tgt_lang} and train.align; see --src-lang/--tgt-lang)", path)
        return files


def ensure_store(files: CorpusFiles, store_dir: Path, extract_model: str, max_phrase_length: int,
                 log: Callable[[str], None], progress: bool = False) -> None:
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
                           max_phrase_length=max_phrase_length, progress=progress,
                           jobs=defaults.JOBS)


def run_pipeline(corpus: Path = defaults.EMBEDDED_CORPUS, out: Path = Path(defaults.PIPELINE_OUT), *,
                 src_lang: str = defaults.SRC_LANG, tgt_lang: str = defaults.TGT_LANG,
                 moses_type: str = defaults.MOSES_TYPE, features: str = defaults.FEATURES,
                 families: list[str] | None = None, name: str | None = None,
                 max_phrase_length: int = defaults.MAX_PHRASE_LENGTH,
                 heldout_fraction: float = defaults.HELDOUT_FRACTION, refit: bool = True,
                 log: Callable[[str], None] = print, progress: bool = False) -> dict[str, Any]:
    """Run every stage; returns the rows of the evaluation table and where things went.

    `refit`: after the evaluation, retrain every family on all sentences and publish that
    (the evaluated models go to OUT/evaluated/); False publishes the evaluated models.
    With heldout_fraction 0 the evaluated models already saw every sentence: no refit.
    `progress`: extraction, feature counting and every solver report as they go
    (training.progress: a bar on a terminal, lines in a log)."""
    from training.eval.studies import run_experiment
    from training.families import FAMILIES, get_family
    from training.features.spec import FeatureSpec
    from training.features.templates import kernel_cached, warm_up
    from training.moses.distortion import limit_advice
    from training.moses.table import WORKER_EXAMPLES as TABLE_WORKER_EXAMPLES
    from training.moses.types import MosesType
    from training.parallel import alongside
    from training.store.examples import ExampleStore

    # Everything that can refuse the input is checked before --out is created, or (the
    # corpus, read as it streams into the store) before anything else is written, and a
    # refused run removes the --out it created: it leaves nothing behind.
    started = datetime.now(timezone.utc)
    mtype = MosesType.parse(moses_type)
    if families is None:
        families = list(defaults.PIPELINE_FAMILIES)
    elif families == ["all"]:
        families = list(FAMILIES)
    for family in families:
        get_family(family)  # InputError listing the known ones
    FeatureSpec.parse(features)
    name = name or corpus.resolve().name
    files = CorpusFiles.locate(corpus, src_lang, tgt_lang)
    created = next((d for d in reversed([out, *out.parents]) if not d.exists()), None)  # topmost new dir
    store_dir = out / "store"
    # A first run compiles the feature kernel on a second core while this one compiles extraction.
    warm = 1 if kernel_cached() else defaults.JOBS
    try:
        out.mkdir(parents=True, exist_ok=True)
        with alongside(warm_up, None, jobs=warm) as warmed:
            ensure_store(files, store_dir, mtype.extract_model, max_phrase_length, log, progress)
            warmed()
    except BaseException:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise

    table = out / f"reordering-table.{mtype}.gz"
    log(f"pipeline: Moses lexicalized table -> {table}")
    store = ExampleStore.open(store_dir)
    # The table and the distortion advice need only the store and the alignments: when the table
    # is small enough to be one process's work, they run beside the experiment on another core.
    beside = defaults.JOBS if store.n_examples < TABLE_WORKER_EXAMPLES else 1
    runs = out / "runs"
    with alongside(table_and_jumps, (str(files.align), str(store_dir), str(mtype), str(table)),
                   jobs=beside) as table_done:
        rows = run_experiment(store_dir, runs, families=families, feature_sets=[features],
                              moses_type=str(mtype), heldout_fraction=heldout_fraction, log=log,
                              progress=progress)
        jumps = table_done()  # its advice ends the summary: said once, at the end
    refit = refit and rows[0]["split"]["heldout_sentences"] > 0
    models_root, evaluated_root = out / SERVED_DIR, out / EVALUATED_DIR
    for row in rows:
        row["evaluated_sentences"] = trained_sentences(Path(row["model"]))
    if refit:
        refit_all(store_dir, rows, runs / "refit", mtype, store.n_sentences, log, progress)
    for row in rows:
        model_name = f"{name}-{row['family']}"
        if refit:
            row["evaluated"] = str(publish(Path(row["model"]), evaluated_root, model_name))
            row["published"] = str(publish(Path(row["refit_model"]), models_root, model_name))
        else:
            row["published"] = str(publish(Path(row["model"]), models_root, model_name))
            row["published_sentences"] = row["evaluated_sentences"]
    shutil.rmtree(runs, ignore_errors=True)

    serve_command = f"moses-reorder serve --models {models_root} --port {defaults.SERVE_ADDRESS.rsplit(':', 1)[1]}"
    decoding = f"{name}-{rows[0]['family']}"   # the first family asked for: by default svm
    run = {"started": started.strftime("%Y-%m-%d %H:%M:%S UTC"), "corpus": str(corpus),
           "sentences": store.n_sentences, "fingerprint": (store.meta.get("corpus") or {}).get("sha256", ""),
           "moses_type": str(mtype), "classes": list(mtype.classes), "directions": list(mtype.directions),
           "split": rows[0]["split"], "rows": rows, "models_root": str(models_root), "table": str(table),
           "refit": refit, "evaluated_root": str(evaluated_root) if refit else None,
           "serve": serve_command, "moses_ini_line": moses_feature_line(mtype, decoding),
           "distortion_limit": jumps.recommend(), "distortion_advice": limit_advice(jumps),
           "embedded_corpus": str(defaults.EMBEDDED_CORPUS)}
    report, report_path = write_reports(out, run, started)
    from training.eval.report import terminal_summary

    return {"rows": rows, "report": report, "report_path": str(report_path), "index": str(out / REPORT_INDEX),
            "summary": terminal_summary(run, out / REPORT_INDEX),
            "models_root": str(models_root), "table": str(table), "store": str(store_dir), "refit": refit,
            "decoding_model": decoding, "moses_ini_line": run["moses_ini_line"],
            "serve_command": serve_command, "distortion_limit": run["distortion_limit"],
            "distortion_advice": run["distortion_advice"]}


def table_and_jumps(task: tuple[str, str, str, str]):
    """Task: Moses's lexicalized table of the store (align, store, type, out) and the corpus's
    jump profile (training.moses.distortion), which the distortion advice is read from."""
    from training.moses.distortion import jump_profile
    from training.moses.table import build_table
    from training.moses.types import MosesType
    from training.store.examples import ExampleStore

    align, store_dir, moses_type, table = task
    build_table(ExampleStore.open(store_dir), MosesType.parse(moses_type), Path(table), jobs=defaults.JOBS)
    return jump_profile(Path(align))


REPORT_INDEX = "report.md"
REPORTS_DIR = "reports"
EVALUATED_DIR = "evaluated"  # the models the report's figures measure, when the published ones are refit


def trained_sentences(model_file: Path) -> dict[str, int]:
    """{fit, calibration, heldout}: the sentences a model file says it was trained on
    (train_model's metadata; the store keeps sentences in corpus order, so these are
    consecutive runs: fit first, calibration next, held out last)."""
    from training.modelfile.container import read_weight_file

    return dict(read_weight_file(model_file).metadata["training"]["sentences"])


def refit_all(store_dir: Path, rows: list[dict[str, Any]], refit_dir: Path, mtype, n_sentences: int,
              log: Callable[[str], None], progress: bool) -> None:
    """Retrain every evaluated model on all sentences with the settings its file records
    (features, threshold, calibration fraction): what was measured is what ships, fitted
    on the held-out sentences too. Adds refit_model, refit_seconds, published_sentences."""
    import time

    from training.api.train import train_model
    from training.eval.report import features_label
    from training.modelfile.container import read_weight_file

    refit_dir.mkdir(parents=True, exist_ok=True)
    for row in rows:
        meta = read_weight_file(row["model"]).metadata
        path = refit_dir / Path(row["model"]).name
        log(f"pipeline: refitting {row['family']} ({features_label(meta['features'])}) on all {n_sentences:,} sentences")
        started = time.perf_counter()
        trained = train_model(store_dir, family=row["family"], moses_type=str(mtype), out=path,
                              features=meta["features"], threshold=meta["threshold"], heldout_fraction=0.0,
                              calibration_fraction=meta["training"]["calibration_fraction"], verbose=progress)
        row.update(refit_model=str(path), refit_seconds=time.perf_counter() - started,
                   published_sentences=dict(trained["training"]["sentences"]))


def write_reports(out: Path, run: dict[str, Any], started: datetime) -> tuple[str, Path]:
    """This run's report as OUT/reports/report-<UTC time>.md, and OUT/report.md listing every
    run (newest first) followed by this one's report: a later run never hides an earlier one.
    Both written atomically; returns (the report, its path)."""
    import json

    from training.atomic import write_bytes_atomic, write_json_atomic
    from training.eval.report import pipeline_report, runs_index

    reports = out / REPORTS_DIR
    reports.mkdir(exist_ok=True)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    path, k = reports / f"report-{stamp}.md", 2
    while path.exists():  # two runs in one second
        path, k = reports / f"report-{stamp}-{k}.md", k + 1
    report = pipeline_report(run)
    write_bytes_atomic(path, report.encode("utf-8"))
    listing = reports / "runs.json"
    entries = json.loads(listing.read_text(encoding="utf-8")) if listing.is_file() else []
    entries.append({"report": path.name, "started": run["started"],
                    "families": [row["family"] for row in run["rows"]]})
    write_json_atomic(listing, entries)
    index = runs_index([(e["report"], e["started"], e["families"]) for e in entries])
    write_bytes_atomic(out / REPORT_INDEX, (index + "\n---\n\n" + report).encode("utf-8"))
    return report, path


def moses_feature_line(mtype, model: str, server: str = defaults.SERVE_ADDRESS) -> str:
    """The moses.ini [feature] line that decodes with a served model (docs/moses.md)."""
    from training.moses.ini import feature_line

    return feature_line(mtype, server=server, model=model)


def run_corpus_experiment(corpus: Path, work: Path, *, families: list[str], feature_sets: list[str],
                          moses_type: str = defaults.EXPERIMENT_TYPE, src_lang: str = defaults.SRC_LANG,
                          tgt_lang: str = defaults.TGT_LANG, threshold: int | None = None,
                          heldout_fraction: float = defaults.HELDOUT_FRACTION,
                          params: dict[str, dict[str, Any]] | None = None,
                          log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """`experiment`: the corpus's store (built or reused under WORK/store), then every
    family x feature set trained into WORK/models and evaluated (eval.studies.run_experiment)."""
    from training.eval.studies import checked_families, run_experiment
    from training.moses.types import MosesType

    mtype = MosesType.parse(moses_type)
    checked_families(families, params)  # before the store is built
    store = work / "store"
    files = CorpusFiles.locate(corpus, src_lang, tgt_lang)
    work.mkdir(parents=True, exist_ok=True)
    ensure_store(files, store, mtype.extract_model, defaults.MAX_PHRASE_LENGTH, log)
    return run_experiment(store, work / "models", families=families, feature_sets=feature_sets,
                          moses_type=moses_type, threshold=threshold, heldout_fraction=heldout_fraction,
                          params=params, log=log)
