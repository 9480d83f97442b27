"""Book pages and their sections rendered from result cells and data (a card's pages in ``card_pages``, the
site-wide pages in ``site``, leaderboards, comparisons, analyses, facts quoted in prose, the course).
``atlaslib.book`` calls these while it renders the site tree; each module returns Markdown (and writes its
downloads) and computes nothing that ``atlaslib`` does not test."""
