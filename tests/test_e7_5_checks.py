"""The hidden tests' helpers of lesson E7.5 pass the reference and name each mutant."""

from __future__ import annotations

import re

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


def walk_mutant(mistake):
    """verify_tree with one of the walks the walk check names."""

    def verify(tree, p_rows, q_rows, rng):
        tokens, parents = tree
        if mistake == "ignores the tree":
            return [int(rng.choice(p_rows.shape[1], p=p_rows[0]))], []
        kids = [[c for c in range(1, len(parents)) if parents[c] == i] for i in range(len(parents))]
        node, emitted, path = 0, [], []
        while kids[node]:
            token, index = trees.multi_draft_accept(
                p_rows[node], q_rows[node], [tokens[c] for c in kids[node]], rng
            )
            emitted.append(token)
            if index is None:
                return emitted, path
            node = kids[node][index]
            path.append(node)
            if mistake == "one level":
                break
        rows = q_rows if mistake == "draft bonus" else p_rows
        emitted.append(int(rng.choice(rows.shape[1], p=rows[node])))
        return emitted, path

    return verify


TREES = [[-1, 0], [-1, 0, 1, 2], [-1, 0, 0, 1, 1, 2]]


def test_the_walk_check_passes_the_reference_and_names_each_wrong_walk():
    e7_5.check_verify_tree_walk(trees.verify_tree, TREES, seed=0)
    for mistake, words in [
        ("ignores the tree", "the tree was ignored"),
        ("one level", "one level walked"),
        ("draft bonus", "the bonus drawn from the draft"),
    ]:
        with pytest.raises(AssertionError, match=words):
            e7_5.check_verify_tree_walk(walk_mutant(mistake), TREES, seed=0)


def test_the_depth_one_sequence_check_names_the_bonus_from_the_draft(models):
    target, draft = models
    kwargs = dict(prompt="def ", widths=(2,), temperature=1.0, runs=3000, seed=9, failure_prob=1e-6)
    e7_5.check_tree_sequence_distribution(trees.verify_tree, target, draft, **kwargs)
    with pytest.raises(AssertionError, match="a row other than target_rows"):
        e7_5.check_tree_sequence_distribution(walk_mutant("draft bonus"), target, draft, **kwargs)


def test_the_draft_bonus_strings_are_far_from_the_target_s():
    """The mistake's exact 2-character distribution after 'def ' with one level of 2 children,
    0.47 from the target's in L1 distance, against the check's tolerance of about 0.17 (the
    strings below 1e-4, left out of it, hold about 1% of the mass)."""
    from specdec_reference import decoding, ngram
    from specdec_reference.testing.e7_5.verify import _draft_bonus_strings

    target, draft = e7_5.models()
    context = ngram.encode("def ")
    wrong = _draft_bonus_strings(target, draft, context, 2, 1.0)
    exact = decoding.prefix_distribution(target, context, 2, 1.0)
    right = {ngram.decode(ix): float(exact[ix]) for ix in zip(*np.nonzero(exact), strict=True)}
    assert 0.98 < sum(wrong.values()) <= 1
    assert sum(abs(wrong.get(k, 0) - right.get(k, 0)) for k in set(wrong) | set(right)) > 0.45


def test_the_acceptance_check_passes_the_reference_and_names_the_rules_that_ignore_q():
    e7_5.check_multi_draft_acceptance(
        trees.multi_draft_accept, P, Q, 3, draws=4000, seed=1, failure_prob=1e-6
    )

    def lookup(p, q, candidates, rng):
        token = int(rng.choice(len(p), p=p))
        return token, next((j for j, x in enumerate(candidates) if x == token), None)

    def straight(p, q, candidates, rng):
        return int(rng.choice(len(p), p=p)), None

    for accept, words in [(lookup, "looked up among the candidates"), (straight, "ignored")]:
        with pytest.raises(AssertionError, match=words):
            e7_5.check_multi_draft_acceptance(
                accept, P, Q, 3, draws=4000, seed=1, failure_prob=1e-6
            )


CACHE_MISTAKES = {
    "the cache truncated after the last accepted node": lambda parents, path, cached: list(
        range(cached + 1 + (path[-1] if path else 0))
    ),
    "node indices used as cache positions": lambda parents, path, cached: [
        *range(cached),
        0,
        *path,
    ],
    "the root's entry left out": lambda parents, path, cached: [
        *range(cached),
        *[cached + v for v in path],
    ],
    "the cached context dropped": lambda parents, path, cached: [cached + v for v in [0, *path]],
    "every node of the tree kept": lambda parents, path, cached: list(range(cached + len(parents))),
}


def test_the_cache_check_passes_the_reference():
    from specdec_reference import tree_cache

    rng = np.random.default_rng(0)
    for _ in range(30):
        parents = e7_5.random_parents(rng, int(rng.integers(1, 15)))
        path = e7_5.random_path(rng, parents)
        e7_5.check_tree_cache_keep(tree_cache.tree_cache_keep, parents, path, int(rng.integers(9)))


@pytest.mark.parametrize("name", sorted(CACHE_MISTAKES))
def test_the_cache_check_names_each_mistake(name):
    with pytest.raises(AssertionError, match=f"That is {re.escape(name)}"):
        e7_5.check_tree_cache_keep(CACHE_MISTAKES[name], [-1, 0, 0, 2, 2], [2, 3], 4)


def test_the_walk_check_fails_a_bonus_from_the_parent_s_row():
    def parent_row(tree, p_rows, q_rows, rng):
        """The reference's walk, with the bonus token of the leaf's parent's row."""
        emitted, path = trees.verify_tree(tree, p_rows, q_rows, rng)
        parent = tree[1][path[-1]] if path else 0
        return emitted[:-1] + [int(np.argmax(p_rows[parent]))], path

    with pytest.raises(AssertionError, match="then the bonus token from target_rows"):
        e7_5.check_verify_tree_walk(parent_row, TREES, seed=0)


def test_a_closed_form_at_alpha_one_is_named_whether_it_raises_or_returns_nan():
    def raises(rates, budget):
        return (1 - rates[0] ** (budget + 1)) / (1 - rates[0]), 0.0

    def nan(rates, budget):
        return float("nan"), float(budget + 1)

    for fn in (raises, nan):
        with pytest.raises(AssertionError, match="a closed form dividing by 1 - alpha"):
            e7_5.check_chain_or_tree(fn, [1.0], 3)
