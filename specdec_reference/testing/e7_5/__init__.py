"""Helpers shared by the hidden tests of lesson E7.5, *Token trees*.

The notebook's hidden cells import this package as ``_e75`` and call these with the
learner's function as an argument; every failure is an ``AssertionError`` whose message
names the call, what was expected and, when the wrong result matches one, the common
mistake behind it.  The models are lesson E7.4's (:func:`~.shared.models`).

- :mod:`.shared`: the models, random trees, a learner's token lists;
- :mod:`.structure`: Part 1, ``tree_depths`` and ``tree_attention_mask``;
- :mod:`.accept`: Part 2, ``multi_draft_accept`` at one node: which candidate it accepts,
  and its output, exactly in distribution;
- :mod:`.verify`: Part 3, ``verify_tree``: its walk to a leaf, its path, and the
  distribution of the text;
- :mod:`.greedy`: Part 4, ``greedy_verify_tree`` and greedy tree decoding;
- :mod:`.budget`: Part 5, ``tree_expected_tokens`` and ``chain_or_tree``;
- :mod:`.cache`: Part 6, ``tree_cache_keep``, the cache after a tree pass.
"""

from .accept import check_multi_draft_acceptance, check_multi_draft_edges, check_multi_draft_node
from .budget import check_chain_or_tree, check_tree_expected_tokens
from .cache import check_tree_cache_keep, random_path
from .greedy import check_greedy_tree_decoding, check_greedy_verify_tree
from .shared import models, random_parents
from .structure import check_tree_attention_mask, check_tree_depths
from .verify import (
    check_tree_sequence_distribution,
    check_verify_tree_paths,
    check_verify_tree_walk,
)

__all__ = [
    "check_chain_or_tree",
    "check_greedy_tree_decoding",
    "check_greedy_verify_tree",
    "check_multi_draft_acceptance",
    "check_multi_draft_edges",
    "check_multi_draft_node",
    "check_tree_attention_mask",
    "check_tree_cache_keep",
    "check_tree_depths",
    "check_tree_expected_tokens",
    "check_tree_sequence_distribution",
    "check_verify_tree_paths",
    "check_verify_tree_walk",
    "models",
    "random_parents",
    "random_path",
]
