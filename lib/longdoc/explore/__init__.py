"""The long-document explorer (``notebooks/explore.ipynb``): type a query or pick a test query, see how
each trained system ranks the corpus, which segment decided each match, NCI's decoded identifier paths,
and the test queries on which two systems disagree most. It reads the trained runs from the cache and
never trains (:func:`longdoc.experiments.cache.cache_only`).

- :mod:`~longdoc.explore.catalog`: which systems exist, from which notebook, and which are trained
- :mod:`~longdoc.explore.ranking`: a system's top k for any query, with relevance marks and lengths
- :mod:`~longdoc.explore.evidence`: the segment or block that decided a match; NCI's prefixes
- :mod:`~longdoc.explore.widgets`: the ipywidgets front end
- :mod:`~longdoc.explore.browser_check`: the notebook driven in headless Chromium
"""
