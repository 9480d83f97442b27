"""atlaslib: the shared logic of the Clinical NLP Evaluation Atlas.

Every computation a card notebook shows lives here, tested; notebooks only call it.
Layout (where things live):

- ``sources``      pinned data files: local data directory or sha256-verified download + cache
- ``cards/``       one module per card: constants, loader, item schema, card-specific logic
- ``splits``       seed-hash rank, stratified and group-disjoint draws, split manifests
- ``models/``      profile registry + one adapter per model capability
- ``protocols/``   zero-shot and probe protocols (item-level, token-level)
- ``metrics/``     one function per metric; bootstrap resampling
- ``results``      run spec + result cell schema, atomic writes, leaderboard frames
- ``runner``       papermill execution of a card notebook for one (card, version, model, protocol)
- ``book``         result cells -> leaderboards and pages; Jupyter Book build; publish gate
- ``cli``          the ``atlas`` command
"""

from .version import __version__  # noqa: F401


def evaluate(card, version, predict_fn=None, predictions=None, **options):
    """The result cell of any system on a card's test split: ``predict_fn`` (called on each item's record)
    or ``predictions`` (a file, folder, mapping or list). See :func:`atlaslib.external.score.evaluate`."""
    from .external import evaluate as _evaluate

    return _evaluate(card, version, predict_fn, predictions, **options)
