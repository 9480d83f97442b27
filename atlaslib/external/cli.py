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
import os
import sys
from pathlib import Path


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
    add_profiles_options(sub)


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


def _say(command: str, exc: BaseException, end: str = "") -> int:
    """One line on stderr for a refused command (exit 2)."""
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    print(f"atlas {command}: {' '.join(str(msg).split())}{end}", file=sys.stderr)
    return 2


def cmd_export(args) -> int:
    from ..matrix import output_dir
    from ..sources import DataSourceError
    from . import export

    try:
        task = export(args.card, args.version, output_dir(args.output, "-o/--output"), split=args.split,
                      data_dir=args.data_dir)
    except (ValueError, KeyError, DataSourceError) as exc:
        return _say("export", exc)
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
    from ..matrix import output_dir
    from ..sources import DataSourceError

    try:
        out = score(args.card, args.version, args.predictions, args.name, description=args.description,
                    trained_on=args.trained_on, protocol=args.protocol,
                    results_dir=output_dir(args.results_dir, "--results-dir"), data_dir=args.data_dir,
                    force=args.force)
    except PredictionsError as exc:
        return _say("score", exc, "; no result cell written")
    except (ValueError, KeyError, DataSourceError) as exc:
        return _say("score", exc)
    for note in out.notes:
        print(f"atlas score: note: {note}", file=sys.stderr)
    cell = out.cell
    print(json.dumps({"card": cell["card"], "version": cell["version"], "model": cell["model"],
                      "protocol": cell["protocol"], "status": out.status, "result_cell": str(out.path),
                      "metrics": {k: v.get("value") for k, v in cell["metrics"].items()}}, indent=1))
    return 0


# -- your own profiles and matrix ---------------------------------------------------------------------------

RUN_KEYS = {"card", "version", "model", "protocol"}
PREDICTION_KEYS = {"card", "version", "predictions", "name", "description", "trained_on", "protocol"}
OPTIONAL_KEYS = {"description", "trained_on", "protocol"}  # may be left empty (null)


def add_profiles_options(sub) -> None:
    """``--profiles FILE`` (repeatable) on ``atlas run``, ``atlas book`` and ``atlas list``; ``--matrix FILE``
    (repeatable) and ``--no-default`` on ``atlas book``. They are applied before the command runs (see
    :func:`_prepared`)."""
    for command in ("run", "book", "list"):
        p = sub.choices.get(command)
        if p is None:
            continue
        p.add_argument("--profiles", action="append", default=[], metavar="FILE",
                       help="a profiles file (same schema as atlaslib/models/profiles.yml) merged over the built-in "
                            "registry (repeatable; also $ATLAS_PROFILES, os.pathsep-separated)")
        if command == "book":
            p.add_argument("--matrix", action="append", default=[], metavar="FILE",
                           help="runs to add to the default matrix: a YAML list of {card, version, model, protocol} "
                                "or {card, version, predictions, name[, description, trained_on]} (repeatable)")
            p.add_argument("--no-default", action="store_true",
                           help="leave the default matrix out: build only the --matrix files' runs and predictions "
                                "files, and only the cards they name (narrowed further by --card)")
        p.set_defaults(func=_prepared(p.get_default("func"), command))


def use_profiles(files) -> None:
    """Put profile files first on ``$ATLAS_PROFILES`` (absolute paths), so that this process, notebook kernels
    and local Dask workers (which inherit the environment) all see the merged registry."""
    from ..models import PROFILES_ENV

    files = [str(Path(f).expanduser().resolve()) for f in files]
    if not files:
        return
    prev = [f for f in os.environ.get(PROFILES_ENV, "").split(os.pathsep) if f]
    os.environ[PROFILES_ENV] = os.pathsep.join(files + [f for f in prev if f not in files])


def read_matrix(path) -> list[dict]:
    """Entries of a matrix file (YAML or JSON, read by :func:`atlaslib.yamlio.load`: aliases bounded, a key
    given twice refused): a list, or a mapping with a ``runs`` list. Each entry is a run ``{card, version, model,
    protocol}`` or scored predictions ``{card, version, predictions, name, ...}``; ``predictions`` paths are
    relative to the matrix file. Unknown or missing keys and values of the wrong type raise ValueError naming
    the file, the entry and the line."""
    from .. import yamlio

    path = Path(path)
    data = yamlio.load(path, what="matrix file", error=ValueError)
    entries = data.get("runs") if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{path}: expected a list of runs (or a mapping with a 'runs' list)")
    out = []
    for n, e in enumerate(entries, 1):
        where = f"{path}: entry {n}"
        if not isinstance(e, dict):
            raise ValueError(f"{where}: expected a mapping with card, version, model, protocol")
        where = f"{path}, line {yamlio.line_of(e)}: entry {n}" if yamlio.line_of(e) else where
        allowed = PREDICTION_KEYS if "predictions" in e else RUN_KEYS
        unknown = sorted(set(map(str, e)) - allowed)
        missing = sorted((allowed & ({"card", "version", "predictions", "name"} if "predictions" in e else RUN_KEYS))
                         - set(e))
        if unknown or missing:
            raise ValueError(f"{where}: " + "; ".join(
                ([f"unknown key(s) {unknown}"] if unknown else []) + ([f"missing key(s) {missing}"] if missing else []))
                + f"; allowed: {sorted(allowed)}")
        for k, v in e.items():
            texts = isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
            ok = (v is None and k in OPTIONAL_KEYS) or (texts if k == "trained_on" else isinstance(v, str))
            if not ok:
                line = yamlio.line_of(e, k)
                raise ValueError(f"{path}{f', line {line}' if line else ''}: entry {n}: key {k!r} must be "
                                 f"{'text or a list of text items' if k == 'trained_on' else 'text'}, got "
                                 f"{yamlio.describe(v)}")
        e = dict(e)
        if "predictions" in e:
            e["predictions"] = str((path.parent / e["predictions"]).resolve())
        e["_where"] = where
        out.append(e)
    return out


def matrix_requests(args) -> list | None:
    """The default matrix plus the ``--matrix`` runs (checked like ``atlas run``'s); scores the matrix's
    predictions entries into the results folder first (cached by the file's sha256). None without --matrix.

    With ``--no-default`` only the matrix files' runs are returned, and ``args.card`` becomes the cards the
    files name (within ``--card`` when given), so that the build renders those cards only."""
    from .. import runner
    from ..book import default_requests
    from ..cards import get_card
    from ..sources import DataSourceError
    from . import PredictionsError, score

    files = getattr(args, "matrix", None) or []
    no_default = getattr(args, "no_default", False)
    if no_default and not files:
        raise ValueError("--no-default needs --matrix FILE (the runs to build instead of the default matrix)")
    if not files:
        return None
    cards = [get_card(c) for c in args.card] if getattr(args, "card", None) else None
    names = {c.name for c in cards} if cards else None
    requests = [] if no_default else default_requests(cards)
    named = []  # the cards the matrix files name, in order (the build's cards under --no-default)
    for f in files:
        for e in read_matrix(f):
            if names is not None and e["card"] not in names:
                continue
            if e["card"] not in named:
                named.append(e["card"])
            if "predictions" in e:
                trained = e.get("trained_on") or []
                try:
                    score(e["card"], e["version"], e["predictions"], e["name"], description=e.get("description", ""),
                          trained_on=[trained] if isinstance(trained, str) else trained, protocol=e.get("protocol"),
                          results_dir=Path(args.results_dir).expanduser().resolve(), data_dir=args.data_dir)
                except PredictionsError as exc:
                    raise ValueError(f"{e['_where']}: {exc}; no result cell written") from None
                except (ValueError, KeyError, DataSourceError) as exc:
                    raise ValueError(f"{e['_where']}: {exc.args[0] if exc.args else exc}") from None
                continue
            req = runner.RunRequest(e["card"], e["version"], e["model"], e["protocol"])
            try:
                runner.check_request(req)
                runner.preflight(runner.resolve_request(req))  # an unknown model is refused here, as by atlas run
            except (ValueError, KeyError) as exc:
                raise ValueError(f"{e['_where']}: {exc.args[0] if exc.args else exc}") from None
            if req not in requests:
                requests.append(req)
    if no_default:
        if not named:
            raise ValueError(f"--no-default: the matrix file(s) list nothing for --card {', '.join(args.card)}")
        args.card = named
    return requests


def _prepared(fn, command: str):
    def run(args) -> int:
        from ..models import ProfileError, load_profiles
        from . import PredictionsError

        try:
            use_profiles(getattr(args, "profiles", []))
            from ..models.registry import PROFILES_FILE
            from ..runner import check_model_name

            builtin = load_profiles(PROFILES_FILE)
            for name in load_profiles():  # one clear error for a bad file or name, before anything runs
                if name not in builtin:
                    check_model_name(name, "--profiles: profile name")  # also against the cards' baselines
            if command == "book":
                args.matrix_requests = matrix_requests(args)
        except (ProfileError, PredictionsError, ValueError, KeyError) as exc:
            print(f"atlas {command}: {exc.args[0] if isinstance(exc, KeyError) and exc.args else exc}",
                  file=sys.stderr)
            return 2
        return fn(args)
    run.__wrapped__ = fn
    return run
