"""Re-scoring a stored run without a kernel: a run whose stored cell carries the run's prediction key and another
scoring key (:data:`KEY_SEPARATOR`) is scored again from its stored predictions, its variant cells likewise, and the
executed notebook's cells tagged :data:`FROM_CELL_TAG` re-rendered from the new cells.

:func:`rescorable` decides whether a stored run can be re-scored (the guard), :func:`rescored_page` makes the new
cell, variant cells and page; :func:`atlaslib.runner.rescore` stages them and moves them into place as a run's
outputs. This module imports the run's scorer (:class:`atlaslib.cards.run.CardRun`), never the runner.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from . import notebook
from .results import cell_as_recorded, read_cell

#: what separates the two parts in a run key: ``<prediction key>.<scoring key>``
KEY_SEPARATOR = "."


def split_key(key) -> tuple[str | None, str | None]:
    """(prediction key, scoring key) of a run key; (key, None) for a key of one part (an older cell's)."""
    if not isinstance(key, str):
        return None, None
    pred, sep, score = key.partition(KEY_SEPARATOR)
    return (pred, score) if sep else (key, None)


#: the tag of a run notebook's code cell whose outputs are a function of the run's result cell alone: it reads
#: only ``cell`` (the cell :meth:`CardRun.finish <atlaslib.cards.run.CardRun.finish>` returned) and
#: ``variant_cells`` (its variant runs' cells), besides what the kernel holds of the cells above it that a re-render
#: holds too (their imports, their pandas display options: :func:`kernel_setup`), and imports anything else it uses
#: (a later such cell sees an earlier one's imports, as the kernel does). A notebook with such cells declares that
#: they hold every output its scoring code makes (metrics tables, intervals, their plots): its runs whose
#: predictions are unchanged are re-scored without a kernel (:func:`rescored_page`) and these cells alone
#: re-rendered from the new cells. A notebook without one executes again.
FROM_CELL_TAG = "from-cell"


#: what of a cell's ``extra`` a re-score makes anew (each training seed's metrics and unit counts; besides, what
#: its card's scoring makes of every finished cell, ``Card.scored_extra``). A cell whose extra holds anything else,
#: but what its card declares its model made (``Card.prediction_extra``, kept as stored), executes again: its card's
#: code may have made it with scoring code (a report, a per-type table, an interval) that the stored value would no
#: longer match.
RESCORED_EXTRA = ("seed_runs",)


@dataclass
class Stored:
    """A stored run that can be re-scored (:func:`rescorable`): its cell, its variant cells, its executed notebook
    and that notebook's :data:`FROM_CELL_TAG` cells."""
    cell: dict
    variants: list
    notebook: object
    tagged: list


def tagged_cells(nb) -> list:
    """The code cells of the notebook ``nb`` tagged :data:`FROM_CELL_TAG` (those a re-score draws again)."""
    return [c for c in nb.cells if c.get("cell_type") == "code" and FROM_CELL_TAG in notebook.tags(c)]


def rescorable(card, protocol: str, key: str, nb_out: Path, res_out: Path) -> Stored | None:
    """The stored run of ``card`` (its declaration: :class:`atlaslib.cards.Card`) and ``protocol`` at ``nb_out`` /
    ``res_out`` when it can be re-scored under the run key ``key``: its stored cell carries this run's prediction key
    and another scoring key. None (the run executes as before) when the stored pair is not the run's as recorded,
    the run is not ok, a variant cell beside it is not its run's (:func:`atlaslib.variants.parents`), its or a
    variant's stored predictions are not what was scored (:func:`scored_as_stored`) or its extra holds more than a
    re-score makes (:data:`RESCORED_EXTRA`), or its notebook tags no cell :data:`FROM_CELL_TAG`."""
    import nbformat

    try:
        if not (nb_out.is_file() and res_out.is_file() and cell_as_recorded(nb_out, res_out) is True):
            return None
        old = read_cell(res_out)
        nb = nbformat.read(nb_out, as_version=4)
    except Exception:
        return None
    (old_pred, old_score), (pred, score) = split_key(old.get("run_key")), split_key(key)
    if old_score is None or old_pred != pred or old_score == score:
        return None
    try:
        variants = [read_cell(p) for p in sorted((res_out.parent / "variants" / protocol).glob("*.json"))]
    except Exception:
        return None
    if refusal(card, old, variants) is not None:
        return None
    tagged = tagged_cells(nb)
    if not tagged:
        return None
    return Stored(old, variants, nb, tagged)


def refusal(card, cell: dict, variants: list) -> str | None:
    """Why the stored ``cell`` of a run of ``card`` and its variant cells ``variants`` cannot be re-scored (the
    guard's part that reads cells only, :func:`rescorable`), or None: the run is not ok, a variant cell is not its
    run's (:func:`atlaslib.variants.parents`), stored predictions are not what was scored (:func:`scored_as_stored`),
    or an extra holds what neither a re-score makes (:data:`RESCORED_EXTRA`; the card's ``scored_extra``, in the
    run's own cell only) nor the card declares its model made (``prediction_extra``)."""
    from .variants import parents

    if cell.get("status") != "ok":
        return f"the run is {cell.get('status')!r}, not ok"
    if len(parents(variants, [cell])) != len(variants):
        return "a variant cell beside it is not its run's"
    if not all(map(scored_as_stored, [cell, *variants])):
        return "its stored scores are not those its metrics were made from"
    # a variant cell is not finished (CardRun.variant): what the card's scoring makes of a cell is made anew for
    # the run's cell only, so a variant's copy would be kept stale
    made = set(RESCORED_EXTRA) | set(card.prediction_extra)
    other = sorted(({k for k in cell.get("extra") or {}} - made - set(card.scored_extra))
                   | {k for v in variants for k in v.get("extra") or {}} - made)
    return f"its extra holds {other}, which scoring code may have made" if other else None


def rescored_page(stored: Stored, key: str, result_path: Path) -> tuple[object, dict] | None:
    """(the executed notebook, the cell) of the run ``stored`` re-scored under the run key ``key``: the run rebuilt
    from its cell (:meth:`CardRun.of_cell <atlaslib.cards.run.CardRun.of_cell>`), its stored predictions scored by
    :meth:`CardRun.score` (a seeded row from ``extra.seed_runs``' predictions), the cell written to ``result_path``
    by :meth:`CardRun.finish` (:func:`rescored_cell`), its variant cells beside it (:func:`rescored_variants`), and
    the notebook's :data:`FROM_CELL_TAG` cells re-rendered from them, its injected run key the new one. None (the
    run executes) when the scoring code cannot score the stored cell or a tagged cell does not re-render into
    outputs of the kinds and count the kernel made (another branch taken)."""
    try:
        cell = rescored_cell(stored.cell, key, result_path)
        variant_cells = rescored_variants(cell, stored.variants, result_path)
    except Exception:  # scoring code that cannot score the stored cell: the run executes and names the error
        return None
    nb = stored.notebook
    for c in stored.tagged:
        outputs = render_from_cell(c, cell, variant_cells, cells_above(nb, c))
        if outputs is None:
            return None
        c.outputs = outputs
    for c in nb.cells:  # the parameters papermill injected: the run key is the new one
        if "injected-parameters" in notebook.tags(c):
            c.source = re.sub(r"(?m)^run_key = .*$", lambda m: f"run_key = {key!r}", c.source)
    injected = (nb.metadata.get("papermill") or {}).get("parameters") or {}
    if "run_key" in injected:
        injected["run_key"] = key
    return nb, cell


def scored_as_stored(cell: dict) -> bool:
    """Whether the scores ``cell``'s metrics were made from are in the cell, so that scoring them again gives, to the
    bit, what executing its notebook gives: each unit's score in its per-unit counts (and in a training seed's) is
    its prediction's stored score, or one its stored score is a rounding of (a run that scored at full precision and
    stored its answers' scores rounded: its records are the predictions with the counts' scores,
    :func:`_full_precision`). False where a stored score is neither (the counts hold another score than the
    prediction's: its card's counting made it, and counting it again would not give the same)."""
    def same(uc, predictions) -> bool:
        scores = (uc or {}).get("scores")
        if scores is None:
            return True
        by_id = {p.get("item_id"): p.get("score") for p in predictions or []}
        return all(_rounding_of(by_id.get(i, s), s) for i, s in zip(uc.get("ids") or [], scores))

    return same(cell.get("unit_counts"), cell.get("predictions")) and all(
        same(r.get("unit_counts"), r.get("predictions")) for r in (cell.get("extra") or {}).get("seed_runs") or [])


def _rounding_of(stored, full) -> bool:
    """Whether the stored score ``stored`` is the score ``full`` or ``full`` rounded to the decimals ``stored``
    shows (``round(full, d)``, as a cell stores it)."""
    if stored == full:
        return True
    if not isinstance(stored, (int, float)) or not isinstance(full, (int, float)) or isinstance(stored, bool):
        return False
    from decimal import Decimal

    exponent = Decimal(repr(float(stored))).as_tuple().exponent
    return isinstance(exponent, int) and round(full, max(0, -exponent)) == stored


def _full_precision(predictions: list, uc: dict | None) -> list:
    """``predictions`` (copies) with each unit's score from the per-unit counts ``uc`` (the score its metrics were
    made from, where the predictions store it rounded; :func:`scored_as_stored` checked it is)."""
    import copy

    predictions = copy.deepcopy(predictions or [])
    scores = (uc or {}).get("scores")
    if scores is None:
        return predictions
    full = dict(zip(uc.get("ids") or [], scores))
    return [dict(p, score=full[p.get("item_id")]) if p.get("item_id") in full and p.get("score") is not None else p
            for p in predictions]


def rescored_cell(old: dict, key: str, result_path=None) -> dict:
    """The cell of the run whose stored cell is ``old``, scored again by this code from its stored predictions and
    written to ``result_path`` (when given) by :meth:`CardRun.finish <atlaslib.cards.run.CardRun.finish>` with run
    key ``key``: the spec, split, data hashes, seeds, extra, overlap, environment and timing are the stored ones;
    the metrics, unit counts and each training seed's metrics and unit counts are new. A metric the stored cell
    gives no value for a reason the run's code gave (not its counts') keeps it where the new scoring does not
    report it either."""
    import copy

    from .cards.run import CardRun
    from .results import RunSpec

    run = CardRun.of_cell(old, result_path=result_path)
    spec = copy.deepcopy(old["spec"])
    spec["parameters"]["run_key"] = key
    run.spec = RunSpec(**spec)
    metrics = run.score(_records(old), reasons=_reasons(old), cell=_context(old))
    return run.finish(metrics=metrics, predictions=copy.deepcopy(old.get("predictions") or []),
                      split=old.get("split"), data_sha256=old.get("data_sha256"), seeds=old.get("seeds"),
                      extra=copy.deepcopy(old.get("extra") or {}), overlap=old.get("overlap"),
                      env=old.get("environment"), timing=old.get("timing"))


def rescored_variants(cell: dict, variants: list, result_path=None) -> list:
    """The variant cells ``variants`` (of the run whose re-scored cell is ``cell``) scored again from their stored
    predictions, as :func:`rescored_cell` scores the run's, and made by :meth:`CardRun.variant
    <atlaslib.cards.run.CardRun.variant>` from ``cell`` (so each carries its new parent run key); written beside
    ``result_path`` (when given) as the run writes them."""
    import copy

    from .cards.run import CardRun
    from .variants import variant_of

    parent = CardRun.of_cell(cell, result_path=result_path)
    for v in variants:
        full = _full_precision(v.get("predictions"), v.get("unit_counts"))
        scorer = CardRun.of_cell(cell)
        metrics = scorer.score(_records(v, full), reasons=_reasons(v), cell=_context(v))
        extra = copy.deepcopy(v.get("extra") or {})
        for r in extra.get("seed_runs") or []:  # each seed as it is scored now, where the cell keeps its numbers
            scored = scorer.seed_scores.get(r.get("seed")) or {}
            r.update({k: scored[k] for k in ("metrics", "unit_counts") if k in r and k in scored})
        spec = dict(variant_of(v))
        n = {k: spec.pop(k, None) for k in ("n_items", "n_applicable", "n_read", "inputs_sha256")}
        parent.variant(spec, metrics=metrics, predictions=copy.deepcopy(v.get("predictions") or []), scored=full,
                       inputs_digest=n["inputs_sha256"], n_items=n["n_items"], n_applicable=n["n_applicable"],
                       timing=v.get("timing"), extra=extra)
    parent.write_variants()
    return parent.variant_cells


def _records(cell: dict, predictions: list | None = None):
    """The records a stored cell's metrics were scored from: its predictions, or for a row over training seeds
    ``{seed: that seed's answers on the cell's items}`` (``extra.seed_runs``); each score the one its per-unit
    counts keep (:func:`_full_precision`; ``predictions``: the cell's, made so already)."""
    if predictions is None:
        predictions = _full_precision(cell.get("predictions"), cell.get("unit_counts"))
    seed_runs = (cell.get("extra") or {}).get("seed_runs") or []
    if not seed_runs:
        return predictions
    by_id = {p["item_id"]: p for p in predictions}
    return {r["seed"]: [{**by_id[p["item_id"]], **p}
                        for p in _full_precision(r["predictions"], r.get("unit_counts"))] for r in seed_runs}


def _context(cell: dict) -> dict:
    """What else of a stored cell its card's counts may read (e.g. a scorer's per-document table)."""
    return {k: v for k, v in cell.items() if k not in ("metrics", "unit_counts", "predictions")}


def _reasons(cell: dict) -> dict:
    """The reasons the run's own code gave for a metric it does not report (not those its counts or the engine
    gave, which the new scoring gives anew)."""
    suffix, undefined = f"_{cell['protocol']}", (cell.get("unit_counts") or {}).get("undefined") or {}
    reasons = {}
    for k, e in cell["metrics"].items():
        name = k[:-len(suffix)] if k.endswith(suffix) else k
        if e.get("value") is None and e.get("reason") and e["reason"] not in (undefined.get(name), "not reported"):
            reasons[name] = e["reason"]
    return reasons


def cells_above(nb, code_cell) -> list:
    """The cells of the notebook ``nb`` above its cell ``code_cell`` (that very cell, not an equal one)."""
    return nb.cells[:next(i for i, c in enumerate(nb.cells) if c is code_cell)]


def kernel_setup(cells_before) -> tuple[ast.Module, dict]:
    """What a kernel holds, when it reaches a cell, of the notebook's cells ``cells_before`` (those above it) that a
    cell tagged :data:`FROM_CELL_TAG` may use: (their top-level ``import`` / ``from ... import`` statements, as a
    module to run; the pandas display options their top-level ``<pandas>.set_option(name, value)`` calls set, with
    literal arguments, in order). Nothing else of those cells is run: a tagged cell reads only the result cell."""
    imports, options = [], {}
    for c in cells_before:
        if c.get("cell_type") != "code":
            continue
        try:
            body = ast.parse(c.source).body
        except SyntaxError:
            continue
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imports.append(node)
            elif (option := _pandas_option(node, imports)) is not None:
                options.update([option])
    return ast.Module(body=imports, type_ignores=[]), options


def _pandas_option(node, imports) -> tuple | None:
    """(name, value) of ``node`` when it is a call ``<pandas>.set_option("<name>", <literal>)``, ``<pandas>`` a name
    the statements ``imports`` bind to the pandas module; else None."""
    pandas_names = {a.asname or a.name for i in imports if isinstance(i, ast.Import) for a in i.names
                    if a.name == "pandas"}
    call = node.value if isinstance(node, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "set_option"
            and isinstance(call.func.value, ast.Name) and call.func.value.id in pandas_names
            and len(call.args) == 2 and not call.keywords):
        return None
    try:
        return ast.literal_eval(call.args[0]), ast.literal_eval(call.args[1])
    except ValueError:
        return None


def render_from_cell(code_cell, cell: dict, variant_cells: list | None = None, cells_before=()) -> list | None:
    """The outputs of the notebook code cell ``code_cell`` (tagged :data:`FROM_CELL_TAG`) executed in this process
    on the result cell ``cell`` and its variant cells ``variant_cells`` (its only names but what the kernel holds of
    the notebook's cells above it, ``cells_before``: their imports and pandas display options, :func:`kernel_setup`,
    and IPython's ``display``), as a kernel records them (nbformat outputs: what it prints, what it displays, its last
    expression's value, formatted by IPython's display formatter, and its matplotlib figures as the inline backend
    draws them, at ``plt.show()`` or after the cell); None when they are not of the kinds and count of the outputs it
    holds (another branch taken): the run then executes."""
    import contextlib

    import nbformat
    from IPython.core import display_functions
    from IPython.core.formatters import DisplayFormatter
    import IPython.display

    fmt, outputs = DisplayFormatter(), []

    def show(*objs, **kw):
        for o in objs:
            data, md = _format(fmt, o)
            outputs.append(nbformat.v4.new_output("display_data", data=data, metadata=md))

    class Stream:
        def write(self, text):
            if outputs and outputs[-1].get("output_type") == "stream":
                outputs[-1]["text"] += text
            elif text:
                outputs.append(nbformat.v4.new_output("stream", name="stdout", text=text))

        def flush(self):
            pass

    tree = ast.parse(code_cell.source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    setup, options = kernel_setup(cells_before)
    namespace = {"cell": cell, "variant_cells": list(variant_cells or []), "__name__": "__main__", "display": show}
    import matplotlib.pyplot as plt
    import pandas as pd

    before = set(plt.get_fignums())

    def show_figures(*a, **k):  # the inline backend's show: every open figure displayed, then closed
        for num in [n for n in plt.get_fignums() if n not in before]:
            show(plt.figure(num))
            plt.close(num)

    saved = IPython.display.display, display_functions.display, plt.show
    try:
        IPython.display.display = display_functions.display = show
        plt.show = show_figures
        # pandas' options as a kernel has them (not a terminal's: its width detected, no column limit), then as the
        # notebook's cells above set them
        kernel = {"display.max_columns": 20, "display.width": 80, **options}
        with contextlib.redirect_stdout(Stream()), pd.option_context(*[x for kv in kernel.items() for x in kv]):
            exec(compile(setup, "<kernel-setup>", "exec"), namespace)
            exec(compile(tree, "<from-cell>", "exec"), namespace)
            value = eval(compile(ast.Expression(last.value), "<from-cell>", "eval"), namespace) if last else None
    except Exception:
        return None
    finally:
        IPython.display.display, display_functions.display, plt.show = saved
    if value is not None and not code_cell.source.rstrip().endswith(";"):
        data, md = _format(fmt, value)
        outputs.append(nbformat.v4.new_output("execute_result", data=data, metadata=md,
                                              execution_count=code_cell.get("execution_count")))
    show_figures()   # drawn, never shown: shown after the cell, as the inline backend does
    kinds = [(o.get("output_type"), sorted(o.get("data", {}))) for o in outputs]
    if kinds != [(o.get("output_type"), sorted(o.get("data", {}))) for o in code_cell.get("outputs", [])]:
        return None
    return outputs


def _format(fmt, obj) -> tuple[dict, dict]:
    """(data, metadata) of ``obj`` as a kernel's display formatter gives them; a matplotlib figure as the inline
    backend draws it (PNG, ``bbox_inches="tight"``, its background metadata)."""
    from matplotlib.figure import Figure

    if isinstance(obj, Figure):
        from IPython.core.pylabtools import print_figure
        from matplotlib_inline.backend_inline import _fetch_figure_metadata

        return ({"image/png": print_figure(obj, "png", bbox_inches="tight", base64=True), "text/plain": repr(obj)},
                _fetch_figure_metadata(obj) or {})
    return fmt.format(obj)
