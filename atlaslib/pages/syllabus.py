"""The course's syllabus page: per lesson its objectives, prerequisites, cards and cells, the agreement it needs,
its reading time (words of its prose and of the sentences it writes, at :data:`READING_WPM`) and its exercises with
their solutions' measured run time. :func:`atlaslib.pages.course.finish_course` fills ``book/course/syllabus.md``'s
``<!-- syllabus -->`` line with it.
"""
from __future__ import annotations

import re
from pathlib import Path

from .lessons import LESSON_DIR, SOLUTION_TAG, SYLLABUS, _has_tag, student_text

SYLLABUS_MARK = "<!-- syllabus -->"
READING_WPM = 200                        # the reading rate the syllabus states its reading times at


def solution_seconds(executed) -> float:
    """How long an executed lesson's solution cells took to run (papermill's per-cell ``duration``), in seconds."""
    total = 0.0
    for c in executed.cells:
        if c.cell_type == "code" and _has_tag(c, SOLUTION_TAG):
            total += float((c.get("metadata", {}).get("papermill") or {}).get("duration") or 0.0)
    return total


def _prose_words(text: str) -> int:
    words = 0
    for line in text.splitlines():
        if line.startswith("```") or line.startswith(":::") or re.match(r"^:[a-z-]+:", line):
            continue
        words += len(re.findall(r"[\w’'-]+", line))
    return words


def reading_words(md_text: str, executed=None) -> int:
    """Words of a lesson's prose, as a student reads it: the markdown of the student edition (without front
    matter, code cells, directive fences and their options) and, given the executed notebook, the Markdown its
    other cells print (the sentences a lesson writes from its numbers)."""
    import jupytext

    nb = jupytext.reads(student_text(md_text), fmt="md:myst")
    words = sum(_prose_words(c.source) for c in nb.cells if c.cell_type == "markdown")
    for c in (executed.cells if executed is not None else ()):
        if c.cell_type == "code" and not _has_tag(c, SOLUTION_TAG):
            for out in c.get("outputs", []):
                words += _prose_words(str((out.get("data") or {}).get("text/markdown", "")))
    return words


def exercise_count(md_text: str) -> int:
    return md_text.count("```{exercise}")


def syllabus_rows(done: dict, texts: dict, timings: dict, executed: dict | None = None) -> list[dict]:
    """One row per lesson for the syllabus: title, objectives, prerequisites, cards and cells, agreement,
    words, reading minutes at :data:`READING_WPM`, exercises and their solutions' measured run time."""
    import math

    from ..cards import available_cards

    cards = {c.name: c for c in available_cards()}
    executed = executed or {}
    rows = []
    for name, (status, lesson) in done.items():
        text = texts.get(name, "")
        words = reading_words(text, executed.get(name))
        gated = [cards[c].title.split(":")[0] for c in lesson.uses if c in cards and cards[c].gated]
        rows.append({"name": name, "title": lesson.title, "status": status,
                     "objectives": list(lesson.meta.get("objectives") or []),
                     "prerequisites": list(lesson.meta.get("prerequisites") or []),
                     "cards": [(c, cards[c].title.split(":")[0] if c in cards else c) for c in lesson.uses],
                     "cells": [r.label for r in lesson.requires + lesson.requires_local],
                     "agreement": gated, "words": words, "reading_minutes": max(1, math.ceil(words / READING_WPM)),
                     "exercises": exercise_count(text), "solution_seconds": timings.get(name)})
    return rows


def syllabus_markdown(rows: list[dict], shown=None) -> str:
    """The syllabus from :func:`syllabus_rows`; a card is a link to its page when the build shows it
    (``shown``: card name -> card; None: every card is linked), else its name as text."""
    from ..escape import md as md_text

    lines = [f"Reading times are the words of each lesson's prose and of the sentences it writes from its numbers (code and solutions "
             f"not counted) at {READING_WPM} words a minute. Exercise times are measured: how long the lesson's solutions took to "
             f"execute when this book was built, on the build machine; a student writing them will take longer.",
             "", "| lesson | reading | exercises | solutions run in | agreement needed |", "|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        secs = "not run in this build" if r["solution_seconds"] is None else f"{r['solution_seconds']:.1f} s"
        title = r["title"].replace("`", "").replace("<", "").replace(">", "")
        lines.append(f"| {i}. {{doc}}`{title} <{r['name']}>` | {r['reading_minutes']} min "
                     f"({r['words']:,} words) | {r['exercises']} | {secs} | "
                     f"{', '.join(r['agreement']) or 'none'} |")
    for i, r in enumerate(rows, 1):
        lines += ["", f"## {i}. {md_text(r['title'])}", ""]
        lines.append("**After this lesson a student can:**")
        lines += [f"- {md_text(o)}" for o in r["objectives"]] or ["- (not stated)"]
        lines += ["", "**Prerequisites:** " + ("; ".join(md_text(p) for p in r["prerequisites"]) or "none"), ""]
        cards = ", ".join(f"[{md_text(t)}](../cards/{c}.md)" if shown is None or c in shown else md_text(t)
                          for c, t in r["cards"]) or "none"
        lines.append(f"**Cards and data:** {cards}; result cells read: "
                     + (", ".join(f"`{c}`" for c in r["cells"]) or "none") + ".")
        lines += ["", "**Agreement needed:** " + (", ".join(r["agreement"]) + " (data use agreement)"
                                                 if r["agreement"] else "none") + ".", ""]
        secs = ("not measured in this build (the lesson was not run)" if r["solution_seconds"] is None
                else f"the solutions ran in {r['solution_seconds']:.1f} s")
        lines.append(f"**Time:** reading about {r['reading_minutes']} min ({r['words']:,} words at {READING_WPM} a "
                     f"minute); {r['exercises']} exercises, {secs}.")
    return "\n".join(lines) + "\n"


def _syllabus(src: Path, done: dict, texts: dict, timings: dict, executed: dict, shown=None) -> None:
    page = src / LESSON_DIR / f"{SYLLABUS}.md"
    if not page.is_file():
        return
    text = page.read_text(encoding="utf-8")
    if SYLLABUS_MARK in text:
        page.write_text(text.replace(SYLLABUS_MARK, syllabus_markdown(syllabus_rows(done, texts, timings, executed),
                                                                      shown)), encoding="utf-8")
