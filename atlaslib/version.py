"""atlaslib's version (also in pyproject.toml): on the ground floor, so that the modules whose cache keys
and result cells record it need not import the package's front door (:mod:`atlaslib`)."""

__version__ = "0.1.0"
