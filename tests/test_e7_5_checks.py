"""The hidden tests' helpers of lesson E7.5 pass the reference and name each mutant."""

from __future__ import annotations

import numpy as np
import pytest
from test_reference_trees import P, Q, mutant_accept, mutant_verify

from specdec_reference import trees
from specdec_reference.testing import e7_5


@pytest.fixture(scope="module")
def models():
    return e7_5.models()


def test_the_reference_passes_every_helper(models):
    target, draft = models
    rng = np.random.default_rng(0)
    for _ in range(20):
        parents = e7_5.random_parents(rng, int(rng.integers(1, 15)))
        e7_5.check_tree_depths(trees.tree_depths, parents)
        e7_5.check_tree_attention_mask(trees.tree_attention_mask, parents)
        tokens = [int(x) for x in rng.integers(0, 3, len(parents))]
        best = [int(x) for x in rng.integers(0, 3, len(parents))]
        e7_5.check_greedy_verify_tree(trees.greedy_verify_tree, tokens, parents, best)
    e7_5.check_multi_draft_node(
        trees.multi_draft_accept, P, Q, 3, draws=4000, seed=1, failure_prob=1e-6
    )
    e7_5.check_multi_draft_edges(trees.multi_draft_accept, 2)
    e7_5.check_verify_tree_paths(
        trees.verify_tree, target, draft, prompt="def ", widths=(3, 2), passes=30, seed=3
    )
    e7_5.check_greedy_tree_decoding(
        trees.greedy_verify_tree, target, draft, prompt="def ", n=40, widths=(2, 2)
    )
    e7_5.check_tree_expected_tokens(trees.tree_expected_tokens, [-1, 0, 0, 1], [0.5, 0.3])
    e7_5.check_chain_or_tree(trees.chain_or_tree, [0.5, 0.3, 0.1], 8)


@pytest.mark.parametrize(
    "mistake, words",
    [("any", "any-candidate rule"), ("unchained", "original p"), ("from-p", "resampling from p")],
)
def test_the_node_check_names_each_mutant(mistake, words):
    with pytest.raises(AssertionError, match=words):
        e7_5.check_multi_draft_node(
            mutant_accept(mistake), P, Q, 3, draws=4000, seed=1, failure_prob=1e-6
        )


def test_the_mask_check_names_the_causal_and_sibling_masks():
    parents = [-1, 0, 0, 1, 1]
    with pytest.raises(AssertionError, match="siblings see each other"):
        e7_5.check_tree_attention_mask(lambda p: np.tril(np.ones((5, 5), bool)), parents)

    def siblings(p):
        m = trees.tree_attention_mask(p)
        for a in range(1, 5):
            for b in range(1, a):
                m[a, b] |= p[a] == p[b]
        return m

    with pytest.raises(AssertionError, match="letting siblings see each other"):
        e7_5.check_tree_attention_mask(siblings, parents)
    with pytest.raises(AssertionError, match="node indices instead of depths"):
        e7_5.check_tree_depths(lambda p: list(range(len(p))), parents)


def test_the_sequence_check_passes_the_reference_and_names_the_any_rule(models):
    target, draft = models
    kwargs = dict(
        prompt="import ", widths=(3, 2), temperature=1.0, runs=3000, seed=7, failure_prob=1e-6
    )
    e7_5.check_tree_sequence_distribution(trees.verify_tree, target, draft, **kwargs)
    with pytest.raises(AssertionError, match="any-candidate"):
        e7_5.check_tree_sequence_distribution(mutant_verify("any"), target, draft, **kwargs)
