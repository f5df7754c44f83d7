"""Reference implementation of chapter E7, speculative decoding (numpy only).

The hidden tests of the course score learners against these functions.

- :mod:`~specdec_reference.roofline`: why decoding is slow (``weight_bytes``,
  ``flops_per_token``, ``kv_cache_bytes``, ``step_time``, ``ridge_batch``,
  ``verify_cost_ratio``, ``max_batch``, ``arithmetic_intensity``), with the published hardware
  and model figures in :mod:`~specdec_reference.specs`;
- :mod:`~specdec_reference.greedy`: the greedy accept step on argmaxes
  (``greedy_verify``);
- :mod:`~specdec_reference.acceptance`: the acceptance test itself
  (``accept_prob``, ``overall_acceptance``, ``spec_accept``, ``residual_distribution``);
- :mod:`~specdec_reference.sampling`: the random parts, each with an explicit
  ``numpy.random.Generator`` (``propose_and_test``, ``empirical_acceptance``,
  ``speculative_step``, ``greedy_step``);
- :mod:`~specdec_reference.analysis`: expected tokens per pass and speed
  (``expected_tokens``, ``speed_estimate``, ``speedup``, ``walltime_improvement``,
  ``optimal_k``, ``speculation_pays``);
- :mod:`~specdec_reference.ngram`: character n-gram models trained on the standard
  library (``train_ngram``, ``encode``, ``decode``, ``corpus_text``);
- :mod:`~specdec_reference.decoding`: the whole decoder (``with_temperature``,
  ``draft``, ``generate``, ``speculative_decode``, ``measured_alpha``,
  ``tokens_per_pass``, ``prefix_distribution``);
- :mod:`~specdec_reference.kvcache`: a key-value cache and the decoder that rolls it
  back (``KVCache``, ``CachedModel``, ``speculative_decode_cached``);
- :mod:`~specdec_reference.trees`: token trees (``tree_depths``, ``tree_attention_mask``,
  ``multi_draft_accept``, ``verify_tree``, ``greedy_verify_tree``,
  ``tree_expected_tokens``, ``best_tree``, ``chain_or_tree``), and the exact
  distributions of ``multi_draft_accept`` (``multi_draft_distribution``,
  ``multi_draft_acceptance``);
- :mod:`~specdec_reference.tree_decoding`: the tree drafter and decoder of lesson E7.5
  on real models (``draft_tree``, ``topk_tree``, ``tree_rows``, ``tree_decode``);
- :mod:`~specdec_reference.tree_cache`: the key-value cache after a tree pass
  (``tree_cache_keep``);
- :mod:`~specdec_reference.lookup`: prompt-lookup drafting, a draft without a model
  (``prompt_lookup_draft``, ``deterministic_verify``, ``lookup_decode``);
- :mod:`~specdec_reference.serving`: speculation in a server, the verification pass
  priced by the roofline at a batch (``batch_step_time``, ``speculative_speedup``,
  ``should_speculate``, ``break_even_batch``, and with each sequence's key-value cache
  ``cached_step_time``, ``cached_break_even_batch``, ``max_batch_in_memory``;
  ``adaptive_k``);
- :mod:`~specdec_reference.variants`: each learner's own numbers for the questions
  answered by hand (``graded_numbers``, the lessons' tables, ``learner_cell_source``).

The hidden tests' helpers are not part of it: they live in
:mod:`~specdec_reference.testing`, as ``numpy.testing`` lives beside numpy.
:mod:`~specdec_reference.bench` times the loop and the vectorized
``empirical_acceptance`` against each other (``python -m specdec_reference.bench``).
"""

from . import kvcache as kvcache  # the cached models, for the hidden tests: _ref.kvcache
from . import ngram as ngram  # the models module, for the hidden tests: _ref.ngram.encode
from . import specs as specs  # the published figures, for the hidden tests: _ref.specs
from .acceptance import accept_prob, overall_acceptance, residual_distribution, spec_accept
from .analysis import (
    expected_tokens,
    optimal_k,
    speculation_pays,
    speed_estimate,
    speedup,
    walltime_improvement,
)
from .decoding import (
    draft,
    generate,
    measured_alpha,
    prefix_distribution,
    speculative_decode,
    tokens_per_pass,
    with_temperature,
)
from .greedy import greedy_verify
from .lookup import deterministic_verify, lookup_decode, prompt_lookup_draft
from .roofline import (
    arithmetic_intensity,
    flops_per_token,
    kv_cache_bytes,
    max_batch,
    ridge_batch,
    step_time,
    verify_cost_ratio,
    weight_bytes,
)
from .sampling import empirical_acceptance, greedy_step, propose_and_test, speculative_step
from .serving import (
    adaptive_k,
    batch_step_time,
    break_even_batch,
    cached_break_even_batch,
    cached_step_time,
    max_batch_in_memory,
    should_speculate,
    speculative_speedup,
)
from .tree_cache import tree_cache_keep
from .trees import (
    best_tree,
    chain_or_tree,
    greedy_verify_tree,
    multi_draft_accept,
    tree_attention_mask,
    tree_depths,
    tree_expected_tokens,
    verify_tree,
)

__all__ = [
    "weight_bytes",
    "flops_per_token",
    "kv_cache_bytes",
    "step_time",
    "ridge_batch",
    "verify_cost_ratio",
    "max_batch",
    "arithmetic_intensity",
    "greedy_verify",
    "accept_prob",
    "overall_acceptance",
    "spec_accept",
    "residual_distribution",
    "propose_and_test",
    "empirical_acceptance",
    "speculative_step",
    "greedy_step",
    "expected_tokens",
    "speed_estimate",
    "speedup",
    "walltime_improvement",
    "optimal_k",
    "speculation_pays",
    "with_temperature",
    "draft",
    "generate",
    "speculative_decode",
    "measured_alpha",
    "tokens_per_pass",
    "prefix_distribution",
    "tree_depths",
    "tree_attention_mask",
    "multi_draft_accept",
    "verify_tree",
    "greedy_verify_tree",
    "tree_expected_tokens",
    "best_tree",
    "chain_or_tree",
    "tree_cache_keep",
    "prompt_lookup_draft",
    "deterministic_verify",
    "lookup_decode",
    "batch_step_time",
    "speculative_speedup",
    "should_speculate",
    "break_even_batch",
    "cached_step_time",
    "cached_break_even_batch",
    "max_batch_in_memory",
    "adaptive_k",
]
