"""Clinical TempEval 2015 card (SemEval-2015 Task 6; Bethard et al. 2015) on the THYME colon-cancer notes.

Data: the THYME temporal annotation layer (Anafora XML) of ``coloncancer/Train`` (293 documents) and
``coloncancer/Dev`` (147 documents, the Clinical TempEval 2015 *test* set) from stylerw/thymedata at a
pinned commit; 440 ``*.Temporal-{Relation,Entity}.gold.completed.xml`` files, each pinned by sha256 in
``thyme_sources.sha256`` beside this module. The note text is under a Mayo Clinic data use agreement and
is not public: the card audits the annotations, runs the text-free phase-2 baselines on them, runs the
whole task on a synthetic PHI-free corpus (:mod:`.synthetic`), and runs it on the real text when a DUA
holder sets the notebook parameter ``thyme_text_dir`` (outputs then hold no note text).

Versions: ``thyme-dev-2015`` (train on Train, score on Dev, as in 2015) and ``synthetic-v1`` (the
synthetic corpus' Train -> Dev). Protocols: ``phase1`` (raw text in) and ``phase2`` (gold EVENT and
TIMEX3 with their attributes given; relations to predict).
Leaderboard metrics (cell names carry the protocol, e.g. ``contains_closure_f1_phase2``):
``event_span_f1``, ``timex_span_f1``, ``doctimerel_f1`` (phase 1: span + DocTimeRel F1),
``doctimerel_accuracy`` (phase 2: the scorer's F1 on the given events), ``contains_f1``,
``contains_closure_f1``; all official-scorer F1 with a 95 % percentile interval from 1,000 document-level
bootstrap resamples (the scorer's per-document counts summed per resample; seed 20150605).
"""
from __future__ import annotations

import os
from pathlib import Path

from ...sources import PinnedFile, read_sha256sums, resolve
from .. import Analysis, Card, Departure, ParameterGate

THYME_COMMIT = "1e00060bb24fcaa2a833d20e4625694b3d15ac13"
THYME_URL = "https://raw.githubusercontent.com/stylerw/thymedata/" + THYME_COMMIT + "/{path}"
SOURCES_FILE = Path(__file__).with_name("thyme_sources.sha256")
THYME_FILES: list[PinnedFile] = read_sha256sums(SOURCES_FILE.read_text(), "thyme/", THYME_URL)
SPLITS = ("Train", "Dev")

METRICS = ("contains_closure_f1", "contains_f1", "doctimerel_f1", "doctimerel_accuracy", "event_span_f1",
           "timex_span_f1")

#: leaderboard metric -> the official scorer's row it reads
METRIC_ROWS = {"event_span_f1": "event_span", "timex_span_f1": "timex3_span", "doctimerel_f1": "doctimerel",
               "doctimerel_accuracy": "doctimerel",
               "contains_f1": "contains", "contains_closure_f1": "contains_closure"}
#: DocTimeRel is span + DocTimeRel F1 in phase 1 (``doctimerel_f1``); in phase 2 the gold events are given and the
#: scorer's F1 is named an accuracy (``doctimerel_accuracy``): never one column. It is the scorer's F1, equal to
#: accuracy only where predicted and reference items are as many (on THYME Dev one span carries two gold values).
DOCTIMEREL_BY_PROTOCOL = {"phase1": "doctimerel_f1", "phase2": "doctimerel_accuracy"}
#: which leaderboard metrics a (model, protocol) addresses; the others get value None with a reason
ADDRESSES = {
    ("memorize", "phase1"): {"event_span_f1", "timex_span_f1", "doctimerel_f1"},
    ("memorize", "phase2"): {"doctimerel_accuracy"},
    ("closest", "phase1"): {"contains_f1", "contains_closure_f1"},
    ("closest", "phase2"): {"contains_f1", "contains_closure_f1"},
    ("majority-doctimerel", "phase2"): {"doctimerel_accuracy"},
}
#: why a baseline reports no value for a metric it does not address
NOT_PREDICTED = {
    "closest": "closest predicts CONTAINS only (in phase 1 its EVENT/TIMEX3 are memorize's: see that row)",
    "memorize": "memorize predicts no CONTAINS (closest is the CONTAINS baseline)",
    "majority-doctimerel": "majority-doctimerel predicts DocTimeRel only",
}
#: the card's intervals: resampled test documents (:mod:`.counting`)
BOOTSTRAP = {"n_resamples": 1000, "seed": 20150605, "unit": "document"}
#: metrics that measure what phase 2 gives a system (gold EVENT/TIMEX3): not applicable there
PHASE2_GIVEN = ("event_span_f1", "timex_span_f1")


def not_addressed(model: str, protocol: str) -> dict:
    """``{leaderboard metric: why it is not reported}`` for a run of ``model`` under ``protocol``: a baseline
    reports only what it predicts (:data:`ADDRESSES`) and the DocTimeRel metric of the protocol
    (:data:`DOCTIMEREL_BY_PROTOCOL`). Any other model is an outside system's Anafora folder: every metric but
    phase 2's given spans (:data:`PHASE2_GIVEN`), both DocTimeRel metrics included, as its cells have had them."""
    given = "gold EVENT/TIMEX3 are given in phase 2"
    if model not in CARD.baselines:
        return {b: f"not applicable: {given}" for b in METRIC_ROWS if protocol == "phase2" and b in PHASE2_GIVEN}
    out = {}
    for base in METRIC_ROWS:
        if base in DOCTIMEREL_BY_PROTOCOL.values() and base != DOCTIMEREL_BY_PROTOCOL[protocol]:
            out[base] = f"not applicable: {protocol} scores DocTimeRel as {DOCTIMEREL_BY_PROTOCOL[protocol]}"
        elif base not in ADDRESSES[(model, protocol)]:
            why = given if protocol == "phase2" and base in PHASE2_GIVEN else NOT_PREDICTED[model]
            out[base] = f"not applicable: {why}"
    return out


#: Slices, as data: slice name -> the ``slices`` key of each per-document record (counts per value) and the
#: leaderboard metric whose items it slices. The value of an item is its attribute (DocTimeRel, Polarity,
#: TIMEX3 Class) or, for CONTAINS, the band of the character gap between its two arguments (:data:`GAP_BANDS`).
#: ``metric`` may name several metrics (DocTimeRel: F1 in phase 1, accuracy in phase 2); a run addresses the
#: slice when one of them has a value.
SLICES = {
    "DocTimeRel class": {"field": "doctimerel", "metric": ("doctimerel_f1", "doctimerel_accuracy")},
    "event polarity": {"field": "polarity", "metric": "event_span_f1"},
    "TIMEX3 class": {"field": "timex3_class", "metric": "timex_span_f1"},
    "CONTAINS argument distance (characters)": {"field": "contains_gap", "metric": "contains_f1",
                                                "order": ("0-20", "21-100", "101-500", ">500")},
}

DEPARTURES = (
    Departure("intervals", "the task paper reports point scores only",
              "every score with a 95 % percentile interval over resampled test documents",
              "the test set is one draw of documents; a difference between systems needs its uncertainty"),
    Departure("baselines", "two baselines: `closest` and `memorize`",
              "adds `majority-doctimerel` (every event gets Train's most frequent DocTimeRel)",
              "the floor a DocTimeRel score must clear"),
    Departure("split versions", "Train and Dev of THYME",
              "adds `synthetic-v1`, invented notes with their own annotations, and runs that need the THYME note "
              "text show \"not run\" unless a holder of the data use agreement supplies it",
              "the note text is under a data use agreement; the synthetic notes show the pipeline end to end"),
    Departure("a score with nothing to count",
              "the official scorer's P, R and F1: P = 1 when nothing is predicted, R = 1 when the reference is "
              "empty, F1 = 0 when P + R = 0",
              "keeps the scorer's values, in the table and in every resample of its intervals; on the atlas's other "
              "cards a ratio whose denominator is 0 is undefined and shown as n/a",
              "the task's figures are the scorer's; an empty side scored otherwise would no longer be the task's "
              "metric",
              code=("atlaslib.cards.tempeval.scoring.f1_from_counts",)),
)

#: ``found`` keys of each record -> the leaderboard metric whose gold items they mark
FOUND = {"event_span": "event_span_f1", "timex3_span": "timex_span_f1",
         "doctimerel": ("doctimerel_f1", "doctimerel_accuracy"),
         "contains": "contains_f1"}

CARD = Card(
    name="tempeval",
    title="Clinical TempEval 2015: times, events, attributes and narrative containers",
    notebook="notebooks/tempeval.md",
    versions=("thyme-dev-2015", "synthetic-v1"),
    protocols=("phase1", "phase2"),
    metrics=METRICS,
    default_matrix=(
        ("thyme-dev-2015", "closest", "phase2"),
        ("thyme-dev-2015", "majority-doctimerel", "phase2"),
        ("synthetic-v1", "memorize", "phase1"),
        ("synthetic-v1", "memorize", "phase2"),
        ("synthetic-v1", "closest", "phase1"),
        ("synthetic-v1", "closest", "phase2"),
    ),
    higher_is_better={m: True for m in METRICS},
    licence_confirmed=False,
    licence_note=("THYME annotations: the source repository states no licence (it asks for acknowledgement of "
                  "Mayo Clinic and a citation of Styler et al. 2014); the note text needs a Mayo Clinic DUA. "
                  "The synthetic corpus is written for this project."),
    gated=True,
    task=("SemEval-2015 Task 6: find TIMEX3 and EVENT spans and attributes, each EVENT's relation to the "
          "document time, and narrative-container (CONTAINS) relations; official anaforatools scoring."),
    data="THYME colon cancer Train (293 docs) / Dev (147 docs = 2015 test set), Anafora XML; text gated (DUA).",
    licence="none stated (acknowledge Mayo Clinic, cite Styler et al. 2014); note text under a Mayo Clinic DUA",
    test_sizes={"thyme-dev-2015": 147, "synthetic-v1": 12},
    pinned_files=tuple(THYME_FILES),
    resampling_unit="document",
    caveats=(
        ("Note text under a DUA", "Without the THYME note text only the text-free phase-2 baselines run on "
                                  "thyme-dev-2015."),
        ("synthetic-v1", "A small PHI-free corpus written for the atlas: its numbers show the pipeline, not "
                         "clinical performance."),
    ),
    baselines={"closest": ("phase1", "phase2"), "memorize": ("phase1", "phase2"),
               "majority-doctimerel": ("phase2",)},
    # phase 1 reads the notes, and memorize reads the train notes in both phases
    parameter_gates=(ParameterGate(parameter="thyme_text_dir", versions=("thyme-dev-2015",), models=("memorize",),
                                   protocols=("phase1",),
                                   reason="needs the note text; THYME text is under a Mayo Clinic DUA "
                                          "(set thyme_text_dir to run it)"),),
    prediction_format="anafora",
    analysis=Analysis(kind="temporal", slices=SLICES, found=FOUND),
    departures=DEPARTURES,
    order=40,  # the book's card order
    # memorize looks up the train notes' annotations, majority-doctimerel counts Train's DocTimeRel; closest is
    # a rule on the given spans
    training_baselines=("memorize", "majority-doctimerel"),
    equivalence_margin=0.02,
    # phase 2 hands the gold EVENT and TIMEX3 spans over: a different question from phase 1's raw text
    ranking_conditions={"phase1": "phase 1 (from raw text)", "phase2": "phase 2 (gold events and times given)"},
    margin_note="small against the 2015 task's gaps between systems and to human agreement",
    # kept as stored by a re-score (atlaslib.rescore): what the run's model and corpus were, the interval's
    # declaration (BOOTSTRAP)
    prediction_extra=("model_info", "gated_text", "corpus", "n_train_documents", "n_test_documents", "ci"),
    # the official scorer's table: its counts and P/R/F1 kept (the scorer and the Anafora files are prediction code
    # in the run key; a re-score counts and resamples its per-document counts again), its attribute accuracy A
    # made anew on every path (scoring's zero-division rule)
    scored_extra={"scorer_table": lambda cell: _with_accuracy(cell["extra"]["scorer_table"])},
)


def _with_accuracy(table: dict) -> dict:
    from .scoring import with_accuracy

    return with_accuracy(table)


def thyme_dir(split: str, data_dir: str | os.PathLike | None = None) -> Path:
    """The verified folder ``.../thyme/coloncancer/<split>``: every pinned file of the split resolved
    (local data dir, else cache, else download from the pinned commit) and its sha256 checked."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: expected one of {SPLITS}")
    files = [pf for pf in THYME_FILES if pf.name.startswith(f"thyme/coloncancer/{split}/")]
    roots = {resolve(pf, data_dir).parents[1] for pf in files}
    if len(roots) != 1:
        raise ValueError(f"THYME {split} files resolved into several folders {sorted(map(str, roots))}; "
                         f"place all of them in one data directory")
    return roots.pop()


def data_sha256(split: str) -> dict:
    """``{file name: sha256}`` of a split's pinned files, for result cells."""
    return {pf.name: pf.sha256 for pf in THYME_FILES if pf.name.startswith(f"thyme/coloncancer/{split}/")}


#: Figures of Bethard et al. (2015) quoted as anchors. ``verified`` = read in the transcription
#: (/work/shared/cards/clinical-tempeval-2015-paper.txt); every other table number was lost in the
#: transcription and not found with the search tools, so the page shows it as unverified (None).
PAPER_ANCHORS = [
    {"what": "EVENT span F1, best system (BluLab)", "value": 0.875, "verified": True},
    {"what": "EVENT span + degree F1, BluLab", "value": 0.870, "verified": True},
    {"what": "EVENT span + polarity F1, BluLab", "value": 0.857, "verified": True},
    {"what": "TIMEX3 class accuracy A, UFPRSheffield-Hynx run 5 (best A)", "value": 0.978, "verified": True},
    {"what": "TIMEX3 span P, memorize baseline", "value": 0.743, "verified": True},
    {"what": "TIMEX3 span R, memorize baseline", "value": 0.372, "verified": True},
    {"what": "TIMEX3 span P / R, memorize without the >50% rule", "value": "0.126 / 0.521", "verified": True},
    {"what": "gap to human agreement: events/degree/polarity ~0.01, modality/type ~0.03, "
             "times and DocTimeRel ~0.05, CONTAINS > 0.40 (F1)", "value": "~0.01 / ~0.03 / ~0.05 / > 0.40",
     "verified": True},
    {"what": "closest (phase 2) precision vs best submitted system", "value": "about 4x", "verified": True},
    {"what": "adj-ann / ann-ann agreement per sub-task (Tables 2-4)", "value": None, "verified": False},
    {"what": "closest baseline CONTAINS P/R/F1, phases 1 and 2 (Table 4)", "value": None, "verified": False},
    {"what": "BluLab DocTimeRel F1 phase 1 / phase 2 (Table 4)", "value": None, "verified": False},
]
