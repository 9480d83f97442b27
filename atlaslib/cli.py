"""The ``atlas`` command.

    atlas split --card negex --version atlas-n100-v1         print the split manifest (JSON)
    atlas run   --card negex --model M --protocol P --version V [--force]
    atlas book  [--publish] [--force] [--no-run] [--card C ...] [--profiles FILE ...] [--matrix FILE ...]
                [--no-default]                               only the --matrix files' runs and their cards
    atlas list                                               cards, versions, default matrix, profiles
    atlas score tempeval -r REF -p PRED [--closure]          official Clinical TempEval scores as JSON
    atlas score nli_negation --cases FIXTURE --predictions FILE      the NLI challenge's report as JSON
    atlas score --card C --version V --predictions FILE --name NAME   a system's predictions -> result cell
    atlas export --card C --version V [--split test|train] -o DIR     items, label set, manifest hash
    atlas course check LESSON ANSWERS.json [--seed S]        a lesson's graded exercise: right/wrong per question

Every command takes ``--data-dir`` (default ``$ATLAS_DATA_DIR``; else the sha256-verified download cache).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import tempfile

from . import interrupts, runner
from .cards import CARD_MODULES, available_cards, get_card


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``atlas run: error: argument --executor: invalid choice: ...`` and
    exit code 2, without the usage block."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _abs(path):
    """A path argument made absolute against the caller's working directory (None stays None)."""
    from pathlib import Path

    return None if path in (None, "") else str(Path(path).expanduser().resolve())


def _fail(command: str, exc: BaseException, code: int = 2) -> int:
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    print(f"atlas {command}: {' '.join(str(msg).split())}", file=sys.stderr)
    return code


def _add_data_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=None,
                   help="local data directory holding the pinned files (default: $ATLAS_DATA_DIR, else the "
                        "download cache)")


def _add_output_dirs(p: argparse.ArgumentParser, build: bool = False) -> None:
    from .book import BuildPaths

    d = BuildPaths()
    p.add_argument("--results-dir", default=str(d.results), help="where result cells go (default: results/)")
    p.add_argument("--runs-dir", default=str(d.runs), help="where executed notebooks go (default: book/runs/)")
    if build:
        p.add_argument("--build-dir", default=str(d.build), help="where the site is built (default: _build/)")


def _add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default=None,
                   help="where Hugging Face models compute: auto (CUDA when torch sees one, else the CPU; the "
                        "default), cpu, cuda or cuda:N (default: $ATLAS_DEVICE, else each profile's option, else auto)")


def _ask_device(args) -> None:
    """``--device``: checked here (a CUDA request on a machine without CUDA is one line, exit 2) and handed to
    every kernel and worker this command starts through ``ATLAS_DEVICE``."""
    from .models import devices

    if getattr(args, "device", None) is None:
        return
    name = devices.check_name(args.device, "--device")
    if name != "auto":
        devices.resolve(name, "--device")
    os.environ[devices.VARIABLE] = name


def _paths(args):
    from pathlib import Path

    from .book import BuildPaths

    from .matrix import output_dir

    d = BuildPaths()
    build = getattr(args, "build_dir", None)
    return BuildPaths(results=Path(output_dir(args.results_dir, "--results-dir")),
                      runs=Path(output_dir(args.runs_dir, "--runs-dir")),
                      build=Path(output_dir(build, "--build-dir")) if build else d.build)


def cmd_split(args) -> int:
    try:
        card = get_card(args.card)
    except KeyError as exc:
        return _fail("split", exc)
    if args.version not in card.versions:
        print(f"atlas split: card {card.name} has no version {args.version!r}; expected one of "
              f"{', '.join(card.versions)}", file=sys.stderr)
        return 2
    mod = importlib.import_module(CARD_MODULES[card.name])
    try:
        items = mod.load_items(_abs(args.data_dir))
        manifest = mod.split(items, args.version)
    except (ValueError, OSError, RuntimeError) as exc:  # data missing or unreadable: named by the loader
        return _fail("split", exc, 1)
    print(manifest.to_json())
    return 0


@contextlib.contextmanager
def _kernel_stderr_held():
    """Kernels started inside inherit file descriptor 2. While the run executes it points at a temporary
    file, so a kernel hit by the same Ctrl-C as `atlas` (a terminal signals the whole group) cannot print
    its own traceback on the terminal; what was held is written out when the run ends without an
    interrupt, so nothing a kernel says is lost otherwise."""
    sys.stderr.flush()
    saved = os.dup(2)
    interrupted = False  # also true when a library swallowed the KeyboardInterrupt (atlaslib.interrupts)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if not (interrupted or interrupts.interrupted()):
                held.seek(0)
                text = held.read().decode(errors="replace")
                if text:
                    sys.stderr.write(text)
                    sys.stderr.flush()


def cmd_run(args) -> int:
    req = runner.RunRequest(args.card, args.version, args.model, args.protocol)
    try:
        paths = _paths(args)
    except ValueError as exc:
        return _fail("run", exc, 2)
    try:
        with _kernel_stderr_held():
            out = runner.run(req, data_dir=_abs(args.data_dir), force=args.force, results_dir=paths.results,
                             runs_dir=paths.runs, failed_dir=paths.build / "failed")
    except runner.RunFailed as exc:
        return _fail("run", exc, 1)
    except runner.OutputError as exc:
        return _fail("run", exc, 1)
    except (runner.NotebookError, ValueError, KeyError) as exc:
        return _fail("run", exc, 2)
    except OSError as exc:
        return _fail("run", OSError(f"{exc.strerror or type(exc).__name__}: {exc.filename or ''}"), 1)
    interrupts.check()  # an interrupt a library swallowed: no output line for a run that was interrupted
    if out.extra.get("note"):
        print(f"atlas run: note: {out.extra['note']}", file=sys.stderr)
    print(json.dumps({"run": out.request.label, "status": out.status, "result": out.cell_status,
                      "notebook": out.notebook, "result_cell": out.result, "seconds": out.seconds}, indent=1))
    return 0


def check_data(cards, data_dir) -> None:
    """Every pinned file of ``cards`` is where the atlas looks (data folder or download cache, downloaded when
    allowed) with its pinned sha256: one DataSourceError naming the file otherwise, before anything runs."""
    from . import sources

    for card in cards:
        for pf in card.pinned_files:
            sources.resolve(pf, data_dir)


def cmd_book(args) -> int:
    from . import book, sources

    from .executor import ExecutorError

    saved = os.environ.get(sources.ENV_DATA_DIR)
    try:
        cards = [get_card(c) for c in args.card] if args.card else None
        paths = _paths(args)
        if args.data_dir:  # the pages, data stories and lessons read data too: in this process and its kernels
            os.environ[sources.ENV_DATA_DIR] = _abs(args.data_dir)
        # a bad executor option is refused before a data story or cluster starts, and with --no-run too (a typo in
        # a build script is named at once, not at the first build that runs something)
        from .executor import check_options

        check_options(args.executor, args.scheduler, args.workers, args.memory_limit)
        check_data(cards if cards is not None else available_cards(), _abs(args.data_dir))
        return book.build(paths=paths, publish=args.publish, force=args.force, run_runs=not args.no_run,
                          data_dir=_abs(args.data_dir), cards=cards, executor=args.executor,
                          scheduler=args.scheduler, n_workers=args.workers, memory_limit=args.memory_limit,
                          requests=getattr(args, "matrix_requests", None))  # --matrix: default + listed runs
        # (--no-default: the listed runs only, and args.card the cards they name)
    except (ValueError, KeyError, ExecutorError, sources.DataSourceError) as exc:
        return _fail("book", exc, 2)
    finally:
        if saved is None:
            os.environ.pop(sources.ENV_DATA_DIR, None)
        else:
            os.environ[sources.ENV_DATA_DIR] = saved


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024


def cmd_cache(args) -> int:
    """The model-call store (and the cache folder around it): list, size, clear."""
    from .models import calls
    from .sources import cache_dir

    use = calls.usage()
    if args.action == "clear":
        n = calls.clear()
        print(f"model-call store {use['dir']}: {n:,} entr{'y' if n == 1 else 'ies'} removed ({_size(use['bytes'])})")
        return 0
    print(f"model-call store {use['dir']}: {use['entries']:,} entries, {_size(use['bytes'])}")
    if args.action == "list":
        for g in calls.listing():
            print(f"  {g['model']:48s} {g['capability']:22s} {g['entries']:>9,} entries {_size(g['bytes']):>12s}")
        root = cache_dir()
        others = sorted(p for p in root.iterdir() if p.is_dir() and p.name != "calls") if root.is_dir() else []
        for p in others:  # model copies, fine-tuned weights, data downloads: not cleared by `atlas cache clear`
            size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.is_symlink())
            print(f"  {p.name + '/':71s} {_size(size):>20s} (not model calls: kept by clear)")
    return 0


def cmd_list(args) -> int:
    from .models import load_profiles

    for card in available_cards():
        print(f"{card.name}: {card.title}")
        print(f"  versions: {', '.join(card.versions)}; protocols: {', '.join(card.protocols)}"
              + ("" if card.licence_confirmed else "; licence unconfirmed (local only)"))
        for v, m, p in card.default_matrix:
            print(f"  default run: {v} / {m} / {p}")
    print("profiles:")
    for name, prof in load_profiles().items():
        print(f"  {name}: {prof.source}, capabilities {', '.join(prof.capabilities)}")
    return 0


def cmd_score(args) -> int:
    if getattr(args, "card", None):  # atlas score --card C --version V --predictions FILE --name NAME
        from .external import cli as external_cli

        return external_cli.cmd_score(args)
    # a card whose package has a command of its own (``score_command(argv) -> exit code``, what it gives in
    # ``SCORE_COMMAND``: TempEval's official scorer, the NLI challenge's report) scores by it
    from .cards import card_names

    def command(name):
        return getattr(importlib.import_module(CARD_MODULES[name]), "score_command", None)

    scorer = command(args.task) if args.task in card_names() else None
    if scorer is None:
        what = "no task given" if args.task is None else f"unknown task {args.task!r}"
        have = [f"{c.name} ({getattr(importlib.import_module(CARD_MODULES[c.name]), 'SCORE_COMMAND', 'its scorer')})"
                for c in available_cards() if command(c.name)]
        print(f"atlas score: {what}; expected {', '.join(have)} or --card C --version V --predictions FILE "
              f"--name NAME", file=sys.stderr)
        return 2
    return scorer(args.rest)


def cmd_course(args) -> int:
    from . import course

    try:
        rows = course.check_answers(args.lesson, args.answers, seed=args.seed, data_dir=_abs(args.data_dir))
    except ValueError as exc:
        return _fail("course check", exc)
    for r in rows:
        if r["given"] is None:
            print(f"{r['question']}: not answered")
        else:
            accepted = "exactly" if r["tolerance"] == 0 else f"accepted within ±{r['tolerance']:g}"
            print(f"{r['question']}: {'right' if r['right'] else 'wrong'} ({r['given']:g}; {accepted})")
    n_right = sum(r["right"] for r in rows)
    print(f"{n_right} of {len(rows)} right")
    return 0 if n_right == len(rows) else 1


def main(argv=None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a log file or a pipe sees each line when it is written (progress)
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True)
    parser = _Parser(prog="atlas", description="Clinical NLP Evaluation Atlas")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("split", help="print a split manifest as JSON")
    p.add_argument("--card", required=True)
    p.add_argument("--version", required=True)
    _add_data_dir(p)
    p.set_defaults(func=cmd_split)

    p = sub.add_parser("run", help="execute a card notebook for one model/protocol/version")
    p.add_argument("--card", required=True)
    p.add_argument("--model", required=True, help="profile name, hub id or local model directory")
    p.add_argument("--protocol", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--force", action="store_true", help="ignore the run cache")
    _add_data_dir(p)
    _add_output_dirs(p, build=True)  # a failed notebook is kept in <build dir>/failed/
    _add_device(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("book", help="run the default matrix and build the HTML book")
    p.add_argument("--publish", action="store_true",
                   help="the site meant for upload: leaves out unlicensed cards and gated data")
    p.add_argument("--force", action="store_true", help="ignore the run cache")
    p.add_argument("--no-run", action="store_true", help="render existing result cells only")
    p.add_argument("--card", action="append", help="limit to these cards (repeatable)")
    p.add_argument("--executor", choices=("dask", "serial"), default="dask",
                   help="dask (default: a LocalCluster, one single-threaded worker per core) or serial")
    p.add_argument("--scheduler", default=None,
                   help="tcp://HOST:PORT of an existing Dask scheduler (default: $ATLAS_DASK_SCHEDULER, else a "
                        "LocalCluster)")
    p.add_argument("--workers", type=int, default=None, help="LocalCluster workers (default: the core count)")
    p.add_argument("--memory-limit", default=None, help="LocalCluster memory limit per worker, e.g. 4GiB")
    _add_device(p)
    _add_data_dir(p)
    _add_output_dirs(p, build=True)
    p.set_defaults(func=cmd_book)

    p = sub.add_parser("course", help="the course: check a lesson's graded exercise")
    course_sub = p.add_subparsers(dest="course_command", required=True, parser_class=_Parser)
    q = course_sub.add_parser("check", help="right or wrong per question of a lesson's graded exercise")
    q.add_argument("lesson", help="the lesson's name (e.g. intervals)")
    q.add_argument("answers", help='JSON: {"seed": SEED, "answers": {"q1": number, ...}}')
    q.add_argument("--seed", type=int, default=None, help="the instructor's seed (default: the file's \"seed\")")
    _add_data_dir(q)
    q.set_defaults(func=cmd_course)

    p = sub.add_parser("cache", help="the model-call store: list what it holds, its size, clear it")
    p.add_argument("action", nargs="?", default="size", choices=("list", "size", "clear"),
                   help="list: entries and bytes per model and capability (and the cache folder's other parts); "
                        "size (default): entries and bytes in all; clear: remove every stored model call")
    p.set_defaults(func=cmd_cache)

    p = sub.add_parser("list", help="cards, versions, default runs and model profiles")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("score", help="score predictions with a card's official scorer")
    p.add_argument("task", nargs="?")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_score)
    from .external import cli as external_cli

    external_cli.add_score_options(p)
    external_cli.register(sub)
    from .harness import cli as harness_cli

    harness_cli.register(sub)

    from .streams import guarded

    with guarded() as (out, err):  # output closed early or full never ends the work (atlaslib.streams)
        args = parser.parse_args(argv)  # --help too: `atlas --help | head -1` is quiet
        try:
            code = _main(args)
        except Exception:  # a fault the command did not expect: work beside it (a data story's daemon thread)
            from .notebook import remove_live_work_dirs  # dies with the process, so its folders go now

            remove_live_work_dirs()
            raise
        out.flush()
        lost = out.lost_line(args.command) or err.lost_line(args.command)
    if lost:
        print(lost, file=sys.stderr)
        sys.stderr.flush()
        return code or 1
    return code


def _main(args) -> int:
    """The command ``args`` asks for, its exit code."""
    from .sources import DataSourceError

    from .models.devices import DeviceUnavailable

    try:
        _ask_device(args)
    except (ValueError, DeviceUnavailable) as exc:  # --device: not a device, or one this machine lacks
        return _fail(args.command, exc, 2)
    with interrupts.handling():
        try:
            code = args.func(args)
        except KeyboardInterrupt:  # Ctrl-C: one line, no traceback; the runner has removed its partial outputs
            code = 130
        except DataSourceError as exc:  # a pinned data file missing or not the pinned one
            code = _fail(args.command, exc, 2)
        if code == 130 or interrupts.interrupted():  # also when a library swallowed the KeyboardInterrupt
            from .notebook import remove_live_work_dirs

            remove_live_work_dirs()  # work beside the command (a data story's thread) keeps nothing either
            import signal

            signum = interrupts.stopped_by() or signal.SIGINT
            how = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
            print(f"atlas {args.command}: {how}; no partial output was kept", file=sys.stderr)
            return 128 + signum
        return code


if __name__ == "__main__":
    sys.exit(main())
