"""Facts quoted in prose: numbers computed from the data and the result cells, placed where a page says
``{{fact:KEY}}``.

A page in ``book/`` (card pages, the intro, the methods chapters, any chapter) never types a count, share
or score by hand: it writes a placeholder such as ``{{fact:negex.distinct_sentences}}`` and
:func:`substitute_site` replaces it while the book renders, with the value computed here. Keys are
``<namespace>.<name>``; each namespace is one provider function (data facts from the card loaders and
audits, run facts from the result cells of this build). A card's facts are its own: its package's ``pages``
module declares ``FACTS`` (namespace -> provider), registered here (:func:`providers`, through
:func:`register_provider`) for every discovered card; this module holds only the mechanism and the facts of
several cards (the fine-tune recipes side by side). A key no provider knows fails the build with
one error naming the page and the key; a fact whose run is not in this build renders as
"n/a (no … run in this build)", never as a stale number.

Formatting is the same everywhere (:meth:`Fact.text`): counts with thousands separators (``2,376``),
shares as percentages with one decimal (``80.6 %``), rates and scores with three decimals (``0.446``),
intervals as ``[0.291, 0.709]``; ``markdown`` facts are whole blocks (small tables) computed the same way.

Numbers that are not from the data (a split seed, years, published figures of the sources, version
names) are listed once with their source: a card's in its ``pages.CONSTANTS``, the others in
:data:`CONSTANTS` (:func:`constants` gives them all); ``tests/test_prose_numbers.py`` checks that every
other number in the prose of the checked pages is a placeholder.

Each provider runs at most once per build (:class:`FactContext` caches it); a card's ``pages`` module says
what its facts cost.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterable

from ..cards.facts import Fact, UnknownFact, join_and, missing  # noqa: F401  (the pages' names for them)
from ..cards.facts import FactContext as _FactContext
from ..registries import Registry

PLACEHOLDER = re.compile(r"\{\{fact:([A-Za-z0-9_.\-]+)\}\}")

#: Numbers a page may type by hand, each with its source, that belong to no one card (a card's own, e.g. its
#: seed or a figure its source published, are its ``pages.CONSTANTS``; :func:`constants` gives them all).
#: Anything else in the checked prose is a ``{{fact:…}}`` placeholder (tests/test_prose_numbers.py holds this).
CONSTANTS: dict[str, str] = {
    "95": "the confidence level of every interval (95 %)",
    "1,000": "bootstrap resamples per interval (atlaslib.metrics.bootstrap)",
    "500": "train items of every atlas-*-v1 split (card definition)",
    "100": "test items of atlas-n100-v1 (card definition, in its name)",
    "0": "zero (gate thresholds, F1 0 or 1 by construction)",
    "1": "one (pass = 1, F1 1 by construction, depth 0–1, first word)",
    "2": "two (negation depth, 'two negations')",
    "3": "three (negation depth, three digits)",
    "0.912": "the illustrative cell in the intro's 'How to read a cell' (not a result)",
    "0.880": "the illustrative cell in the intro's 'How to read a cell' (not a result)",
    "0.940": "the illustrative cell in the intro's 'How to read a cell' (not a result)",
    "4.0": "the licence name CC BY 4.0",
    "30": "the scheduler connect timeout in seconds (atlaslib.executor); the cluster count under which the "
          "metrics chapter warns that a cluster bootstrap is too narrow",
    "15": "seconds without a finished run before a build asks the Dask scheduler whether it still answers "
          "(atlaslib.executor.HEARTBEAT)",
    "0.95": "the confidence level as a fraction",
    "2.5": "lower percentile of a 95 % interval",
    "97.5": "upper percentile of a 95 % interval",
    "80": "power of the minimum detectable difference (atlaslib.metrics.compare)",
    "5": "two-sided level of the minimum detectable difference, in %",
    "127.0.0.1": "the loopback address",
    "1.3.1": "medspaCy version",
    "2010": "year (i2b2 2010)",
    "2014": "year (Styler et al. 2014)",
    "2015": "year (Clinical TempEval 2015)",
    "2019": "year",
    "2020": "year (MACCROBAT2020)",
    "12": "hex digits of a key shown in the splits chapter (a display choice)",
    "0.2": "the almost-stochastic-order threshold ε_min < 0.2 (deepsig's recommendation; atlaslib.metrics.seeds)",
}


#: The pages whose prose :func:`typed_numbers` checks (relative to the repository): card pages, the intro,
#: the methods chapters.
PROSE_PAGES = ("book/cards/*.md", "book/intro.md", "book/methods/*.md")

_FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
_CODE_INFO = re.compile(r"^\s*(\{(code-cell|code|code-block|literalinclude|math|raw)\}|[A-Za-z0-9_+-]+)?\s*$")
_NUMBER = re.compile(r"(?<![\w.#])\d+(?:,\d{3})*(?:\.\d+)*(?:/\d+)?(?![\w])")


def prose_text(markdown: str) -> list[tuple[int, str]]:
    """The prose lines of a MyST page, each with its line number: code fences (```` ``` ````,
    ```` ```{code-cell} ````), inline code, HTML comments, ``{{fact:…}}`` placeholders, link targets, URLs
    and directive options (``:alt: …``) removed; the text of admonitions and figures' captions kept."""
    text = re.sub(r"<!--.*?-->", lambda m: "\n" * m.group(0).count("\n"), markdown, flags=re.S)
    out, fence = [], None
    for no, line in enumerate(text.split("\n"), 1):
        m = _FENCE.match(line.strip())
        if fence is not None:
            if m and m.group(1)[0] == fence[0][0] and len(m.group(1)) >= len(fence[0]) and not m.group(2).strip():
                fence = None
            elif not fence[1] and not re.match(r"^\s*:[\w-]+:", line):
                out.append((no, line))
            continue
        if m:
            fence = (m.group(1), bool(_CODE_INFO.match(m.group(2))))
            continue
        out.append((no, line))
    cleaned = []
    for no, line in out:
        line = PLACEHOLDER.sub(" ", line)
        line = re.sub(r"`[^`]*`", " ", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        line = re.sub(r"https?://\S+", " ", line)
        cleaned.append((no, line))
    return cleaned


def constants() -> dict[str, str]:
    """Every number a page may type: :data:`CONSTANTS` and each discovered card's ``pages.CONSTANTS``
    (number -> its source; a number two cards list carries both sources)."""
    from ..cards import card_names, card_pages

    out = dict(CONSTANTS)
    for name in card_names():
        for number, why in (getattr(card_pages(name), "CONSTANTS", None) or {}).items():
            out[number] = f"{out[number]}; {why}" if number in out and why not in out[number] else why
    return out


def typed_numbers(markdown: str) -> list[tuple[int, str]]:
    """Every number typed in the prose of ``markdown`` (see :func:`prose_text`) that is not in
    :func:`constants`, as ``(line, number)``. Parts of words and names are not numbers: ``i2b2``,
    ``MiniLM-L6-v2``, ``Apache-2.0``, ``F1``, ``SemEval-2015``."""
    found, allowed = [], constants()
    for no, line in prose_text(markdown):
        for m in _NUMBER.finditer(line):
            before = line[max(0, m.start() - 2):m.start()]
            if len(before) == 2 and before[1] == "-" and before[0].isalnum():
                continue  # a hyphenated name: Apache-2.0, SemEval-2015
            if m.group(0) not in allowed:
                found.append((no, m.group(0)))
    return found


class FactContext(_FactContext):
    """:class:`atlaslib.cards.facts.FactContext` knowing every registered namespace (:func:`providers`: the facts
    of several cards here, each card's own, and those other modules register)."""

    def known(self) -> Registry:
        return providers()


# -- substitution ----------------------------------------------------------------------------------------

def substitute(text: str, ctx: FactContext, where: str = "<text>") -> str:
    """Replace every ``{{fact:KEY}}`` in ``text``; an unknown key raises :class:`UnknownFact` naming
    ``where`` and the key."""
    def repl(m: re.Match) -> str:
        try:
            return ctx.get(m.group(1)).text()
        except UnknownFact as exc:
            raise UnknownFact(f"{where}: {exc}") from None

    return PLACEHOLDER.sub(repl, text)


def fact_text(key: str, cells: Iterable[dict] = (), data_dir=None) -> str:
    """One fact as the pages write it (for notebooks quoting the same numbers as the card pages)."""
    return FactContext(cells=list(cells), data_dir=data_dir).get(key).text()


def substitute_site(src: Path, cells: Iterable[dict], data_dir=None, cache_dir=None) -> list[str]:
    """Fill the placeholders of every Markdown page of the rendered site tree ``src`` (after the card
    pages, intro and chapters are rendered). Returns the pages changed."""
    ctx = FactContext(cells=list(cells), data_dir=data_dir, cache_dir=cache_dir)
    changed = []
    for page in sorted((Path(src) / "book").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        if "{{fact:" not in text:
            continue
        page.write_text(substitute(text, ctx, str(page.relative_to(src))), encoding="utf-8")
        changed.append(str(page.relative_to(src)))
    return changed


# -- facts of several cards -------------------------------------------------------------------------------

def finetune_recipes_markdown() -> str:
    """The fine-tune recipes of the cards that have one (``FINETUNE_RECIPE``, card data), side by side, in the
    cards' order, each column headed by the card's short name."""
    from ..cards import available_cards, card_module
    from ..protocols.recipe import RECIPE_KEYS

    recipes = {c.short_name or c.title.split(":")[0]: card_module(c.name).FINETUNE_RECIPE for c in available_cards()
               if getattr(card_module(c.name), "FINETUNE_RECIPE", None)}
    show = lambda v: f"{v:g}" if isinstance(v, float) else ("—" if v is None else str(v))  # noqa: E731
    lines = ["| setting | " + " | ".join(recipes) + " | meaning |", "|---|" + "---|" * len(recipes) + "---|"]
    for k, meaning in RECIPE_KEYS.items():
        if any(k in r for r in recipes.values()):
            lines.append(f"| `{k}` | " + " | ".join(show(r.get(k)) for r in recipes.values()) + f" | {meaning} |")
    return "\n".join(lines)


def _finetune(ctx: FactContext) -> dict[str, Fact]:
    return {"finetune.recipes": Fact(finetune_recipes_markdown(), "markdown",
                                     "FINETUNE_RECIPE in the card packages (atlaslib/cards/<card>/card.py)")}


#: namespace -> provider: the facts of several cards here; each card's own (its ``pages`` module's
#: ``FACTS``) are added on first use (:func:`providers`), and other modules add theirs with
#: :func:`register_provider`
PROVIDERS: Registry[Callable[[FactContext], dict[str, Fact]]] = Registry("fact namespace")
PROVIDERS.add("finetune", _finetune)
_CARD_FACTS: dict[str, str] = {}  # namespace -> the card that registered it
_CARDS_SEEN: set[str] = set()  # the card modules whose facts are registered


def providers() -> Registry[Callable[[FactContext], dict[str, Fact]]]:
    """:data:`PROVIDERS` with every discovered card's facts registered (each card's ``pages.FACTS``, through
    :func:`register_provider`; a card registers once, and two cards cannot claim one namespace)."""
    from ..cards import CARD_MODULES, card_names, card_pages

    for name in [n for n in card_names() if CARD_MODULES[n] not in _CARDS_SEEN]:
        for namespace, provider in (getattr(card_pages(name), "FACTS", None) or {}).items():
            if _CARD_FACTS.get(namespace, name) != name:
                raise ValueError(f"fact namespace {namespace!r} is claimed by card {_CARD_FACTS[namespace]!r} and "
                                 f"card {name!r}")
            register_provider(namespace, provider)
            _CARD_FACTS[namespace] = name
        _CARDS_SEEN.add(CARD_MODULES[name])
    return PROVIDERS


def register_provider(namespace: str, provider: Callable[[FactContext], dict[str, Fact]]) -> None:
    """Add a namespace of facts from another module (e.g. ``register_provider("compare", my_facts)`` at import
    time of a module the book renderer imports): ``provider(ctx)`` returns ``{"compare.<name>": Fact(...)}``.
    A namespace is registered once; a second registration under the same name is an error."""
    PROVIDERS.add(namespace, provider)
