"""The book's "Imported evaluations" part: runs from lm-eval or Inspect logs (``atlas import ... --book``), only
when imports exist.

``atlas import --book`` keeps its report under ``<results>/imported/<task>/`` (:func:`keep`); :func:`render` writes
``book/imported/index.md`` (one leaderboard per imported task) and ``book/imported/<task>.md`` (leaderboard, ranks
and "not distinguishable from the best", paired comparisons with McNemar and Holm, the detectable difference,
calibration, and the item explorer: every document's metric values per run), with the report's CSV and JSON
files beside them as downloads, and adds the part to the site's ``_toc.yml``. Every number is the report's
(:mod:`atlaslib.harness.report`), and no document text is shown (documents by id, values only).
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import yaml

FOLDER = "imported"
CAPTION = "Imported evaluations"


def slug(task: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", str(task).lower()).strip("-") or "task"


def keep(report: dict, results_dir) -> Path:
    """Keep ``report`` for the book: ``<results_dir>/imported/<task>/`` (replacing an earlier import of the task)."""
    from ..harness.report import write

    out = Path(results_dir) / FOLDER / slug(report["task"])
    write(report, out)
    return out


def reports(results_dir) -> list[tuple[str, Path, dict]]:
    """``(slug, folder, report)`` of every kept import, by task."""
    from .. import jsonio

    root = Path(results_dir) / FOLDER
    out = []
    for f in sorted(root.glob("*/report.json")):
        out.append((f.parent.name, f.parent, jsonio.load(f, what="an imported report", error=ValueError)))
    return out


def _items(report: dict) -> list[str]:
    from ..escape import md

    items = report["items"]
    if not items:
        return []
    cols = [c for c in items[0] if c not in ("unit",)]
    lines = ["", "## Item explorer", "",
             f"Every document's values per run ({len(items)} units; all of them in `items.csv`).", "",
             "| " + " | ".join(md(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for row in items:
        lines.append("| " + " | ".join(md(row[c]) if isinstance(row[c], str) else
                                      ("n/a" if row[c] is None else f"{row[c]:.6g}") for c in cols) + " |")
    return lines


def render(src: Path, results_dir, publish: bool = False) -> list[str]:
    """Write the part's pages into the site tree ``src`` and add it to ``src/_toc.yml``; the docs written (none
    without imports, and none in a publish build: the logs, their settings and paths are the user's, kept local)."""
    from ..escape import md
    from ..harness.report import FILES, markdown

    folder = src / "book" / FOLDER
    if folder.is_dir():  # generated: an import removed since the last build leaves no page behind
        shutil.rmtree(folder)
    kept = [] if publish else reports(results_dir)
    if not kept:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    docs = []
    index = ["# Imported evaluations", "",
             "Runs from other harnesses' per-sample logs (lm-evaluation-harness `--log_samples`, Inspect `.eval`), "
             "paired on the documents they share and scored with the same statistics as the cards' pages "
             "(`atlas import`).", ""]
    for name, path, report in kept:
        page = [f"# {md(report['task'])}", "",
                "Downloads: " + ", ".join(f"{{download}}`{f} <{name}/{f}>`" for f in FILES if f != "report.md"), "",
                markdown(report, title=False), *_items(report), ""]
        (folder / name).mkdir(exist_ok=True)
        for f in FILES:
            if f != "report.md" and (path / f).is_file():
                shutil.copyfile(path / f, folder / name / f)
        (folder / f"{name}.md").write_text("\n".join(page), encoding="utf-8")
        docs.append(f"book/{FOLDER}/{name}")
        best = [r for r in report["ranks"] if r.get("tie_group") == "top"]
        index.append(f"- [{md(report['task'])}]({name}.md): {len(report['runs'])} run(s), {report['n_units']} "
                     f"{md(report['unit'])} units; not distinguishable from the best on {md(report['primary'])}: "
                     + ", ".join(md(r["model"]) for r in best))
    (folder / "index.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    toc_path = src / "_toc.yml"
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    toc["parts"] = [p for p in toc.get("parts", []) if p.get("caption") != CAPTION]
    toc["parts"].append({"caption": CAPTION, "chapters": [
        {"file": f"book/{FOLDER}/index", "sections": [{"file": d} for d in docs]}]})
    toc_path.write_text(yaml.safe_dump(toc, sort_keys=False), encoding="utf-8")
    return [f"book/{FOLDER}/index", *docs]
