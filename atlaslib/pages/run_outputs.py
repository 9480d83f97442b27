"""A run page's outputs that are a function of its result cell alone: one function per output, each reading only
the run's cell (and its variant cells), displaying what the page shows there. A card notebook calls them from its
cells tagged ``from-cell`` (:data:`atlaslib.rescore.FROM_CELL_TAG`), so that a re-scored run's page is re-rendered
from its new cell without a kernel (:func:`atlaslib.rescore.render_from_cell`), as executing the notebook draws it.

- :func:`metrics_table`: the cell's metrics with their intervals (a row over training seeds: its seeded table
  first);
- :func:`bootstrap_plot`: each metric's distribution over the resamples its interval was drawn from;
- :func:`confusion`: every test unit's gold label against the run's, with its caption;
- :func:`variants_table`: the run against each of its variant runs (perturbations, prompt variants).

Each displays through IPython's ``display`` and matplotlib's ``plt.show`` as looked up when it is called (the
re-rendering captures both), and returns None (a notebook cell calling one shows no value of its own).
"""
from __future__ import annotations


def metrics_table(cell: dict) -> None:
    """The metrics of the run's result cell with their intervals and notes in full (:func:`atlaslib.results.
    metrics_frame`); a row over training seeds (``extra.seed_runs``) first says so and shows its seeded table
    (:mod:`atlaslib.pages.seeds`: the mean over seeds with the two-level interval). Nothing for a run that did not
    happen."""
    import pandas as pd
    from IPython.display import Markdown, display

    from .. import results
    from . import seeds as seed_page

    if cell["status"] != "ok":
        return
    seed_runs = (cell.get("extra") or {}).get("seed_runs")
    with pd.option_context("display.max_colwidth", None):   # every note in full
        if seed_runs:
            display(Markdown(seed_page.run_markdown(cell["metrics"], len(seed_runs))))
            display(seed_page.seeded_table(cell["metrics"]))
        display(results.metrics_frame(cell["metrics"]))


def bootstrap_plot(cell: dict, resampled: str | None = None) -> None:
    """Each metric's distribution over the resamples the run's intervals were drawn from, read back from its cell
    (:meth:`CardRun.of_cell <atlaslib.cards.run.CardRun.of_cell>`; a row over training seeds: its first seed's),
    titled by model, protocol and version (and, given ``resampled``, "<n> resamples of <resampled>"). Nothing for a
    run that did not happen."""
    import matplotlib.pyplot as plt

    from .. import plots
    from ..cards.run import CardRun

    if cell["status"] != "ok":
        return
    r = CardRun.of_cell(cell)
    n = f": {r.spec.parameters.get('n_resamples')} resamples of {resampled}" if resampled else ""
    plots.bootstrap_distributions(r.samples(), r.sampled_metrics, title=" · ".join(
        [cell["model"], cell["protocol"], cell["version"] + n] + ([r.sampled_label] if r.sampled_label else [])))
    plt.show()


def confusion(cell: dict, labels=()) -> None:
    """The run's confusion matrix read from its cell (:func:`atlaslib.analysis.confusion.confusion`: gold × predicted,
    ``labels`` first in their order) under its caption; the caption alone (why there is none) when the cell has no
    gold/predicted pairs."""
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    from .. import plots
    from ..analysis.confusion import confusion as confusion_of

    frame, caption = confusion_of(cell, labels)
    display(Markdown(caption))
    if frame is not None:
        plots.confusion_matrix(frame, title=cell["model"])
        plt.show()


#: what a run page says where its run has no variant cells
NO_VARIANTS = "No variant runs: this run did not happen, or its answers do not depend on the text."


def variants_table(cell: dict, variant_cells: list) -> None:
    """The run against each of its variant runs (:func:`atlaslib.pages.robustness.run_frame` of ``cell`` and
    ``variant_cells``, every text in full), or :data:`NO_VARIANTS` when it has none."""
    import pandas as pd
    from IPython.display import Markdown, display

    if variant_cells:
        from .robustness import run_frame

        with pd.option_context("display.max_colwidth", None):   # every cell's text in full
            display(run_frame([cell, *variant_cells]))
    else:
        display(Markdown(NO_VARIANTS))
