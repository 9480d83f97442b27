"""``atlas import``: other harnesses' logs compared with the book's statistics, written as a report.

    atlas import [lm-eval|inspect] PATH ... -o DIR [--name NAME ...] [--cluster doc.FIELD] [--epochs mean|cluster]
                 [--shared-only] [--metric M] [--resamples B] [--seed S] [--book [--results-dir DIR]]

    atlas export-task lm-eval|inspect DIR --card C --version V

A PATH is an lm-eval output folder or ``samples_<task>_<date>.jsonl`` file, or an Inspect ``.eval`` log (or a
folder of them); the harness is told by the word before the paths, else by each path (``.eval``: Inspect). Writes
``report.json``, ``report.md`` and CSV files into DIR. Exit codes: 0 done, 2 bad input (one line naming the file,
line or sample; nothing is written).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HARNESSES = ("lm-eval", "inspect")


def register(sub) -> None:
    """Add ``atlas import`` to the ``atlas`` subparsers."""
    from ..metrics import bootstrap

    p = sub.add_parser("import", help="compare runs from lm-eval or Inspect logs with the book's statistics")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="[lm-eval|inspect] then log files or folders (lm-eval --log_samples output, Inspect .eval)")
    p.add_argument("-o", "--output", required=True, help="folder the report is written into")
    p.add_argument("--name", action="append", default=[], help="a run's name, once per PATH in order (default: "
                                                               "the model named in the log)")
    p.add_argument("--cluster", default=None, metavar="doc.FIELD",
                   help="resample whole clusters of documents sharing this document field (default: documents)")
    p.add_argument("--epochs", choices=("mean", "cluster"), default="mean",
                   help="Inspect epochs: the mean per sample (default), or each epoch a unit clustered by sample")
    p.add_argument("--shared-only", action="store_true",
                   help="compare on the documents every log shares when their document sets differ")
    p.add_argument("--metric", default=None, help="the primary metric (ranks, detectable difference; default: the "
                                                  "logs' first)")
    p.add_argument("--resamples", type=int, default=bootstrap.DEFAULT_RESAMPLES, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=bootstrap.DEFAULT_SEED, help="bootstrap seed")
    p.add_argument("--book", action="store_true",
                   help="also keep the report for the book's \"Imported evaluations\" part (under --results-dir)")
    p.add_argument("--results-dir", default=None, help="where --book keeps it (default: results/)")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("export-task", help="write a card version as an lm-eval or Inspect task (local files only)")
    p.add_argument("format", choices=("lm-eval", "inspect"), help="the harness the task is for")
    p.add_argument("output", metavar="DIR", help="folder the task files are written into (never the book build)")
    p.add_argument("--card", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--data-dir", default=None,
                   help="local data directory holding the pinned files (default: $ATLAS_DATA_DIR, else the "
                        "download cache)")
    p.set_defaults(func=cmd_export_task)


def harness_of(path: str) -> str:
    """``inspect`` for an ``.eval`` log or a folder holding one, else ``lm-eval``."""
    p = Path(path)
    if p.suffix == ".eval" or (p.is_dir() and any(p.rglob("*.eval")) and not any(p.rglob("samples_*.jsonl"))):
        return "inspect"
    return "lm-eval"


def read_runs(paths, names=(), harness: str | None = None, epochs: str = "mean") -> list:
    """Every run of ``paths`` (see the module docstring); ``names`` label the paths' runs in order."""
    from .logs import LogError, read_inspect, read_lm_eval

    names = list(names)
    if names and len(names) != len(paths):
        raise LogError(f"--name given {len(names)} time(s) for {len(paths)} path(s); give one name per path, or none")
    runs = []
    for k, path in enumerate(paths):
        which = harness or harness_of(path)
        label = names[k] if names else None
        got = read_inspect(path, label=label, epochs=epochs) if which == "inspect" else read_lm_eval(path, label=label)
        if label and len(got) > 1:
            raise LogError(f"{path}: holds {len(got)} logs; --name names one run (give the files one by one)")
        runs.extend(got)
    return runs


def cmd_import(args) -> int:
    from ..matrix import output_dir
    from ..names import check_name
    from .logs import LogError
    from .pairing import pair
    from .report import build, drift_line, write

    paths = list(args.paths)
    harness = paths.pop(0) if paths[0] in HARNESSES else None
    try:
        if not paths:
            raise LogError(f"give one or more log paths after {harness!r}")
        if args.resamples < 100:
            raise LogError(f"--resamples {args.resamples}: expected at least 100")
        for n in args.name:
            check_name(n, "--name")
        out = output_dir(args.output, "-o/--output")
        book_dir = None
        if args.book:
            from ..book import BuildPaths

            book_dir = output_dir(args.results_dir or BuildPaths().results, "--results-dir")
        runs = read_runs(paths, args.name, harness, args.epochs)
        for r in runs:
            check_name(r.label, f"{r.files[0]}: the model's name (give --name)", path=True)
        p = pair(runs, cluster=args.cluster, shared_only=args.shared_only, primary=args.metric)
        report = build(p, args.seed, args.resamples)
    except (LogError, ValueError) as exc:
        print(f"atlas import: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    drift = drift_line(report)
    if drift:
        print(f"atlas import: note: {drift}", file=sys.stderr)
    for n in report["notes"]:
        print(f"atlas import: note: {n}", file=sys.stderr)
    try:
        files = write(report, out)
        if book_dir is not None:
            from ..pages.imported import keep

            kept = keep(report, book_dir)
            print(f"atlas import: kept for the book in {kept}", file=sys.stderr)
    except OSError as exc:
        print(f"atlas import: the report could not be written ({exc.strerror or type(exc).__name__}: "
              f"{exc.filename or out})", file=sys.stderr)
        return 1
    print(json.dumps({"task": report["task"], "runs": [r["label"] for r in report["runs"]],
                      "n_units": report["n_units"], "unit": report["unit"], "prompt_drift": len(report["prompt_drift"]),
                      "primary": report["primary"], "output": out, "files": files}, indent=1))
    return 0


def cmd_export_task(args) -> int:
    from ..matrix import output_dir
    from ..sources import DataSourceError
    from .export import ExportError, export

    try:
        out = export(args.format, args.card, args.version, output_dir(args.output, "DIR"), data_dir=args.data_dir)
    except (ExportError, ValueError, DataSourceError) as exc:
        print(f"atlas export-task: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=1))
    return 0
