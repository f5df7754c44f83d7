"""Helpers shared by the hidden tests of lesson E7.4, *Speculative decoding end to end*.

The notebook's hidden cells import this package as ``_e74`` and call these with the
learner's function as an argument, for instance ``_e74.check_draft_rows(draft, models,
...)``; every failure is an ``AssertionError`` whose message names the call, what was
expected and, when the wrong result matches one, the common mistake behind it.  The
models are built here from the reference (:mod:`specdec_reference.ngram`), on the same
standard-library files as the notebook's, so every expected value is computed at run
time from the Python version that runs the notebook.

- :mod:`.shared`: the lesson's two models, a model that records its calls, a learner's
  token list;
- :mod:`.distribution`: an empirical distribution against an exact one, in L1 distance;
- :mod:`.temperature`: Part 1, ``with_temperature`` and its mistakes;
- :mod:`.draft`: Part 2, ``draft``: its rows, its tokens' distribution, ``k = 0``;
- :mod:`.decode`: Part 3, ``speculative_decode`` pass by pass, and the verify step the
  notebook gives learners;
- :mod:`.exactness`: Part 3, the decoder's output follows the target, and what the
  common mistakes make of it;
- :mod:`.greedy`: Parts 3 and 4, both decoders at temperature 0 against greedy decoding;
- :mod:`.cache`: Part 4, ``speculative_decode_cached``: both caches after every pass;
- :mod:`.stats`: Part 5, ``measured_alpha`` and ``tokens_per_pass``;
- :mod:`.pays`: Part 6, when speculation pays (``speculation_pays``).
"""

from ... import ngram as ngram  # the models module, for the callers of e7_4.ngram.encode
from .cache import CacheRecorder, check_cached_decode
from .decode import check_decode_passes
from .decode import verify as verify  # the accept step the notebook gives learners
from .distribution import check_distribution
from .draft import check_draft_empty, check_draft_follows_q, check_draft_rows
from .exactness import check_sequence_distribution
from .exactness import first_token_mistakes as first_token_mistakes
from .greedy import check_greedy_equivalence
from .pays import check_speculation_pays, improvement_by_sum
from .shared import DRAFT_ORDER, TARGET_ORDER, Recorder, models, tokens
from .stats import check_stat
from .stats import random_stats as random_stats
from .temperature import check_with_temperature

__all__ = [
    "DRAFT_ORDER",
    "TARGET_ORDER",
    "CacheRecorder",
    "Recorder",
    "check_cached_decode",
    "check_decode_passes",
    "check_distribution",
    "check_draft_empty",
    "check_draft_follows_q",
    "check_draft_rows",
    "check_greedy_equivalence",
    "check_sequence_distribution",
    "check_speculation_pays",
    "check_stat",
    "improvement_by_sum",
    "check_with_temperature",
    "models",
    "tokens",
]
