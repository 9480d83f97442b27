"""``atlas export`` and ``atlas score --card``: the command-line side of :mod:`atlaslib.external`.

    atlas export --card C --version V [--split test|train] -o DIR
    atlas score  --card C --version V --predictions FILE --name NAME [--description TEXT]
                 [--trained-on DATASET ...] [--protocol P] [--results-dir DIR] [--force]

Exit codes: 0 done, 2 bad input (a bad predictions file, an unknown card / version / protocol); a bad
predictions file writes no cell.
"""
from __future__ import annotations

import argparse
import json
import sys


def _data_dir(p: argparse.ArgumentParser) -> None:
    if not any("--data-dir" in a.option_strings for a in p._actions):
        p.add_argument("--data-dir", default=None,
                       help="local data directory holding the pinned files (default: $ATLAS_DATA_DIR, else the "
                            "download cache)")


def register(sub) -> None:
    """Add ``atlas export`` to the ``atlas`` subparsers."""
    p = sub.add_parser("export", help="write a card's items, label set and manifest hash for an outside system")
    p.add_argument("--card", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--split", choices=("test", "train"), default="test",
                   help="test (default: no gold) or train (with gold, for training a system)")
    p.add_argument("-o", "--output", required=True, help="folder to write into")
    _data_dir(p)
    p.set_defaults(func=cmd_export)


def add_score_options(p: argparse.ArgumentParser) -> None:
    """The ``--card`` form of ``atlas score`` (scoring a predictions file into a result cell)."""
    from ..book import BuildPaths

    g = p.add_argument_group("scoring a predictions file into a result cell (atlas score --card ...)")
    g.add_argument("--card", default=None, help="the card the predictions answer")
    g.add_argument("--version", default=None, help="the card's split version")
    g.add_argument("--predictions", default=None,
                   help="JSONL or CSV (item_id, label[, score]); MACCROBAT tags or CoNLL; TempEval an Anafora folder")
    g.add_argument("--name", default=None, help="the system's name (its leaderboard row)")
    g.add_argument("--description", default="", help="one or two sentences on the system")
    g.add_argument("--trained-on", action="append", default=[], metavar="DATASET",
                   help="a dataset the system was built or tuned on (repeatable); flags overlap with the card")
    g.add_argument("--protocol", default=None, help="the card protocol the cell is filed under (default: the first)")
    g.add_argument("--results-dir", default=str(BuildPaths().results), help="where result cells go (default: results/)")
    g.add_argument("--force", action="store_true", help="score again even if the file is unchanged")
    _data_dir(p)


def cmd_export(args) -> int:
    from . import export

    try:
        task = export(args.card, args.version, args.output, split=args.split, data_dir=args.data_dir)
    except (ValueError, KeyError) as exc:
        print(f"atlas export: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"card": task["card"], "version": task["version"], "split": task["split"],
                      "n_items": task["n_items"], "manifest_sha256": task["manifest_sha256"],
                      "output": args.output, "files": task["files"]}, indent=1))
    return 0


def cmd_score(args) -> int:
    from . import PredictionsError, score

    missing = [f"--{k}" for k in ("version", "predictions", "name") if not getattr(args, k, None)]
    if missing:
        print(f"atlas score: --card needs {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        out = score(args.card, args.version, args.predictions, args.name, description=args.description,
                    trained_on=args.trained_on, protocol=args.protocol, results_dir=args.results_dir,
                    data_dir=args.data_dir, force=args.force)
    except PredictionsError as exc:
        print(f"atlas score: {exc}; no result cell written", file=sys.stderr)
        return 2
    except (ValueError, KeyError) as exc:
        print(f"atlas score: {exc}", file=sys.stderr)
        return 2
    cell = out.cell
    print(json.dumps({"card": cell["card"], "version": cell["version"], "model": cell["model"],
                      "protocol": cell["protocol"], "status": out.status, "result_cell": str(out.path),
                      "metrics": {k: v.get("value") for k, v in cell["metrics"].items()}}, indent=1))
    return 0
