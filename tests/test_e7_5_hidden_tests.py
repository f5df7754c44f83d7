"""Lesson E7.5: the hidden tests grade fairly, catch every mistake once and say which one.

The source notebook's test cells run here in this process (``support.lessons.Lesson``),
after learner code built from solution bodies (the samples' and the extra mutants
below).  Which cells each sample loses is checked through the real grader by
test_lessons.py (``expected.json``).  This module declares what the lessons' contract
checks (test_lesson_contracts.py: ``SAMPLE_MESSAGES``, ``EXTRA_MUTANTS``,
``GRADED_PHRASES``) and checks the lesson's own rules.  The reference's own tests are
in test_reference_trees.py, the helpers' in test_e7_5_checks.py.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from support.lessons import Lesson, failing

#: Ungraded cells the test cells' visible parts rely on (models, drafting and scoring trees).
LESSON = Lesson("e7_5_token_trees", support_cells={"code-setup", "code-models", "code-trees"})
SCENARIOS = LESSON.scenarios
TEST_CELLS = LESSON.test_cells
SOLUTION_CELLS = LESSON.solution_cells
ACCEPT_CELLS = {g for g in TEST_CELLS if g.startswith("test_multi_draft_accept")}
VERIFY_CELLS = {g for g in TEST_CELLS if g.startswith("test_verify_tree")}
GREEDY_CELLS = {g for g in TEST_CELLS if g.startswith("test_greedy_verify_tree")}
BUDGET_CELLS = {"test_tree_expected_tokens_values", "test_chain_or_tree_values"}
EXACT = ("test_multi_draft_accept_exact", "test_verify_tree_exact")
ACCEPTANCE = "test_multi_draft_accept_acceptance"
#: The statistical cells at a tenth of their size, for tests whose subject is not the
#: sample size: each check's tolerance follows its size, so its false-failure bound holds.
SMALLER = {"draws=4000": "draws=400", "runs=3000": "runs=300"}


def execute(bodies=None, *, only=None, replace=None):
    return LESSON.run(bodies, only=only, replace=replace).outcomes


# ---------------------------------------------------------------------------
# Correct solutions get full marks
# ---------------------------------------------------------------------------


#: multi_draft_accept bodies that draw differently but exactly: the docstring leaves the order
#: of draws free.
OTHER_DRAWS = {
    "all uniforms first, 1 - u compared": """
        r = np.asarray(p, dtype=float)
        u = 1.0 - rng.random(len(candidates))
        for j, x in enumerate(candidates):
            if u[j] <= min(1.0, r[x] / q[x]) and r[x] > 0:
                return int(x), j
            left = np.maximum(r - q, 0.0)
            if left.sum() > 0:
                r = left / left.sum()
        return int(rng.choice(len(r), p=r)), None
        """,
    "Gumbel-max fallback": """
        r = np.asarray(p, dtype=float)
        for j, x in enumerate(candidates):
            if rng.random() * q[x] < r[x]:
                return int(x), j
            left = np.maximum(r - q, 0.0)
            if left.sum() > 0:
                r = left / left.sum()
        with np.errstate(divide="ignore"):
            scores = np.log(r) + rng.gumbel(size=len(r))
        return int(np.argmax(scores)), None
        """,
}


@pytest.mark.parametrize("rule", sorted(OTHER_DRAWS))
def test_multi_draft_accept_drawn_in_another_exact_order_keeps_its_points(rule):
    bodies = {"multi_draft_accept": OTHER_DRAWS[rule]}
    assert failing(execute(bodies, only=ACCEPT_CELLS, replace=SMALLER)) == {}


#: greedy_verify_tree bodies that follow another child with the matching token: the last
#: one, or the one whose subtree matches deepest (the longest accepted path).
OTHER_GREEDY_CHILDREN = {
    "last matching child": """
        tokens, parents = tree
        node, emitted, path = 0, [], []
        while True:
            emitted.append(int(target_argmax[node]))
            kids = [c for c in range(1, len(parents))
                    if parents[c] == node and tokens[c] == target_argmax[node]]
            if not kids:
                return emitted, path
            node = kids[-1]
            path.append(node)
        """,
    "longest path": """
        tokens, parents = list(tree[0]), list(tree[1])

        def longest(node):
            best = []
            for c in range(1, len(parents)):
                if parents[c] == node and tokens[c] == target_argmax[node]:
                    below = [c] + longest(c)
                    if len(below) > len(best):
                        best = below
            return best

        path = longest(0)
        return [tokens[v] for v in path] + [int(target_argmax[path[-1] if path else 0])], path
        """,
}


@pytest.mark.parametrize("rule", sorted(OTHER_GREEDY_CHILDREN))
def test_greedy_passes_that_follow_another_matching_child_keep_their_points(rule):
    """Where two children carry the target's argmax, either gives a right greedy pass."""
    bodies = {"greedy_verify_tree": OTHER_GREEDY_CHILDREN[rule]}
    assert failing(execute(bodies, only=GREEDY_CELLS)) == {}


def test_a_greedy_pass_that_stops_while_a_child_still_matches_fails():
    """Stopping after the first level, though a grandchild matches, is no right path: it
    loses the values cell (its text still decodes greedily, only fewer tokens a pass)."""
    body = """
        tokens, parents = tree
        for c in range(1, len(parents)):
            if parents[c] == 0 and tokens[c] == target_argmax[0]:
                return [int(tokens[c]), int(target_argmax[c])], [c]
        return [int(target_argmax[0])], []
        """
    lost = failing(execute({"greedy_verify_tree": body}, only=GREEDY_CELLS))
    assert set(lost) == {"test_greedy_verify_tree_values"}
    assert "expected" in lost["test_greedy_verify_tree_values"]


#: The graded functions in the order the notebook defines them.
GRADED = [
    "tree_depths",
    "tree_attention_mask",
    "multi_draft_accept",
    "verify_tree",
    "greedy_verify_tree",
    "tree_expected_tokens",
    "chain_or_tree",
    "tree_cache_keep",
]


def cells_of(function):
    return {
        g
        for g, c in TEST_CELLS.items()
        if f"reference_guard(globals(), ['{function}'])" in c.source
    }


@pytest.mark.parametrize("function", GRADED)
def test_a_function_keeps_its_points_when_every_other_graded_function_is_broken(function):
    """No cascade: each test cell runs its function with the reference in place of every
    graded function defined before it, which is any that a learner's version could call."""
    broken = {other: "raise NotImplementedError()" for other in GRADED if other != function}
    assert failing(execute(broken, only=cells_of(function), replace=SMALLER)) == {}


def test_every_test_cell_binds_the_reference_for_each_earlier_graded_function():
    """What the cell binds, read from its source: every graded function defined before the
    one it tests (a learner's function may call any of them), and no other."""
    for gid, cell in TEST_CELLS.items():
        function = re.search(r"reference_guard\(globals\(\), \['(\w+)'\]\)", cell.source)[1]
        bound = re.findall(
            r'use_reference_for_cell\(globals\(\), "(\w+)", _ref\.(\w+)\)', cell.source
        )
        assert all(name == ref for name, ref in bound), gid
        assert [name for name, _ in bound] == GRADED[: GRADED.index(function)], gid


# ---------------------------------------------------------------------------
# Each sample mistake loses its cells, and the message names it
# ---------------------------------------------------------------------------

#: {scenario: {lost cell: words its message must contain}}.
SAMPLE_MESSAGES = {
    "mistake-indices-as-depths": {
        "test_tree_depths_values": "positions taken as node indices instead of depths",
    },
    "mistake-causal-mask": {"test_tree_attention_mask_values": "causal mask"},
    "mistake-siblings-see-each-other": {
        "test_tree_attention_mask_values": "a mask letting siblings see each other",
    },
    "mistake-any-candidate": {
        "test_multi_draft_accept_acceptance": "nearer to the any-candidate rule",
        "test_multi_draft_accept_exact": "the any-candidate rule (each candidate tested against "
        "the original p, no residual update between candidates)",
    },
    "mistake-no-residual-update": {
        "test_multi_draft_accept_acceptance": "no residual update between candidates",
        "test_multi_draft_accept_exact": "no residual update between candidates",
    },
    "mistake-resample-from-p": {
        "test_multi_draft_accept_exact": "resampling from p instead of the last residual",
    },
    "mistake-accept-samples-p": {
        "test_multi_draft_accept_acceptance": "a token drawn from p with the candidates ignored",
        "test_multi_draft_accept_edges": "the first candidate is always accepted",
    },
    "mistake-accept-p-lookup": {
        "test_multi_draft_accept_acceptance": "a token drawn from p and then looked up among "
        "the candidates",
        "test_multi_draft_accept_edges": "the first candidate is always accepted",
    },
    "mistake-no-bonus-token": {
        "test_verify_tree_walk": "That is the missing bonus token",
        "test_verify_tree_paths": "That is the missing bonus token",
    },
    "mistake-verify-ignores-tree": {
        "test_verify_tree_walk": "the tree was ignored",
        "test_verify_tree_paths": "expected ([1, 2, 0], [1, 3])",
    },
    "mistake-verify-one-level": {
        "test_verify_tree_walk": "That is one level walked (an if where a loop belongs)",
        "test_verify_tree_paths": "expected ([1, 2, 0], [1, 3])",
    },
    "mistake-verify-bonus-from-draft": {
        "test_verify_tree_walk": "That is the bonus drawn from the draft",
        "test_verify_tree_exact": "nearer to the bonus token drawn from a row other than "
        "target_rows[leaf]",
    },
    "mistake-greedy-no-target-token": {
        "test_greedy_verify_tree_values": "the path's tokens without the target's own token",
        "test_greedy_verify_tree_decoding": "it must emit at least the target's own token",
    },
    "mistake-expected-without-target-token": {
        "test_tree_expected_tokens_values": "without the target's own token",
    },
    "mistake-closed-form-at-alpha-one": {
        "test_tree_expected_tokens_values": "a closed form dividing by 1 - alpha",
        "test_chain_or_tree_values": "a closed form dividing by 1 - alpha",
    },
    "mistake-cache-truncates": {
        "test_tree_cache_keep_values": "the cache truncated after the last accepted node",
    },
}


# Mistakes without a sample notebook: {name: (bodies, cells to run, {lost cell: words})}.
EXTRA_MUTANTS = {
    "depths-counted-from-one": (
        {"tree_depths": "return [len(node_path(parents, i)) + 1 for i in range(len(parents))]"},
        {"test_tree_depths_values"},
        {"test_tree_depths_values": "depths counted from 1"},
    ),
    "mask-transposed": (
        {
            "tree_attention_mask": """
            n = len(parents)
            mask = np.eye(n, dtype=bool)
            for i in range(1, n):
                mask[i] |= mask[parents[i]]
            return mask.T
            """
        },
        {"test_tree_attention_mask_values"},
        {"test_tree_attention_mask_values": "the mask transposed"},
    ),
    "mask-without-the-diagonal": (
        {
            "tree_attention_mask": """
            n = len(parents)
            mask = np.eye(n, dtype=bool)
            for i in range(1, n):
                mask[i] |= mask[parents[i]]
            return mask & ~np.eye(n, dtype=bool)
            """
        },
        {"test_tree_attention_mask_values"},
        {"test_tree_attention_mask_values": "the mask without the diagonal"},
    ),
    "residuals-from-the-original-p": (
        {
            "multi_draft_accept": LESSON.samples.accept(
                reject="current = np.maximum(p - q, 0.0) / np.maximum(p - q, 0.0).sum()"
            )
        },
        ACCEPT_CELLS,
        {
            "test_multi_draft_accept_acceptance": "every residual taken from the original p",
            "test_multi_draft_accept_exact": "every residual taken from the original p",
        },
    ),
    # Right answers, wrong shape: a bare token instead of (token, index).
    "accept-returns-only-the-token": (
        {
            "multi_draft_accept": LESSON.samples.accept()
            .replace("), j", ")")
            .replace("), None", ")")
        },
        ACCEPT_CELLS,
        {
            "test_multi_draft_accept_acceptance": "expected (token, index",
            "test_multi_draft_accept_exact": "expected (token, index",
            "test_multi_draft_accept_edges": "expected (token, index",
        },
    ),
    # Tests every candidate of a node itself with the any-candidate rule.
    "verify-with-the-any-rule-inline": (
        {
            "verify_tree": LESSON.samples.verify().replace(
                """token, index = multi_draft_accept(target_rows[node], draft_rows[node],
                                      [tokens[c] for c in children[node]], rng)""",
                """p, q = target_rows[node], draft_rows[node]
    token, index = None, None
    for j, c in enumerate(children[node]):
        if rng.random() < min(1.0, p[tokens[c]] / q[tokens[c]]):
            token, index = tokens[c], j
            break
    if index is None:
        left = np.maximum(p - q, 0.0)
        token = int(rng.choice(len(p), p=left / left.sum()))""",
            )
        },
        VERIFY_CELLS,
        {"test_verify_tree_exact": "the any-candidate rule"},
    ),
    # Goes on below the first child after every child was rejected.
    "verify-continues-after-a-rejection": (
        {
            "verify_tree": LESSON.samples.verify().replace(
                """    if index is None:
        return emitted, path
    node = children[node][index]""",
                """    if index is None:
        index = 0
    node = children[node][index]""",
            )
        },
        VERIFY_CELLS,
        {
            "test_verify_tree_paths": "the path's tokens, then one more token",
            "test_verify_tree_exact": "the path's tokens, then one more token",
        },
    ),
    "greedy-searches-the-whole-tree": (
        {
            "greedy_verify_tree": """
            tokens, parents = tree
            node, emitted, path = 0, [], []
            while True:
                emitted.append(int(target_argmax[node]))
                match = next((c for c in range(1, len(parents))
                              if c not in path and tokens[c] == target_argmax[node]), None)
                if match is None:
                    return emitted, path
                node = match
                path.append(node)
            """
        },
        GREEDY_CELLS,
        {
            "test_greedy_verify_tree_values": "the whole tree searched",
            "test_greedy_verify_tree_decoding": "Follow a child only when its token",
        },
    ),
    "expected-rates-zero-at-every-node": (
        {
            "tree_expected_tokens": """
            return 1.0 + sum(rates[0] ** len(node_path(parents, i)) for i in range(1, len(parents)))
            """
        },
        {"test_tree_expected_tokens_values"},
        {"test_tree_expected_tokens_values": "rates[0] at every node"},
    ),
    "chain-or-tree-returns-the-chain-twice": (
        {
            "chain_or_tree": """
            chain = sum(rates[0] ** i for i in range(budget + 1))
            return chain, chain
            """
        },
        {"test_chain_or_tree_values"},
        {"test_chain_or_tree_values": "the chain again"},
    ),
}


# ---------------------------------------------------------------------------
# The statistical checks: other seeds, stated bounds
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scenario, cells",
    [
        ("mistake-any-candidate", {EXACT[0], ACCEPTANCE}),
        ("mistake-resample-from-p", {EXACT[0]}),
        ("mistake-accept-samples-p", {ACCEPTANCE}),
        ("mistake-accept-p-lookup", {ACCEPTANCE}),
    ],
)
def test_the_node_checks_fail_the_acceptance_mistakes_for_other_seeds(scenario, cells):
    """The reference passes the same checks for many seeds: test_reference_trees."""
    replace = {"seed=7510 + _case": "seed=8510 + _case", "seed=7560 + _case": "seed=8560 + _case"}
    lost = failing(execute(SCENARIOS[scenario], only=cells, replace=replace))
    assert set(lost) == cells


def test_the_sequence_check_fails_the_draft_bonus_for_another_seed():
    replace = {"seed=7530": "seed=8530"}
    lost = failing(
        execute(SCENARIOS["mistake-verify-bonus-from-draft"], only={EXACT[1]}, replace=replace)
    )
    assert set(lost) == {EXACT[1]}


def test_the_statistical_cells_state_a_false_failure_probability_below_one_in_a_million():
    cell = TEST_CELLS[ACCEPTANCE].source
    assert "draws=4000" in cell and "failure_prob=2e-7" in cell and "_pairs" in cell
    assert "below 1e-6" in cell and 2 * 2e-7 < 1e-6  # the visible check cannot fail
    cell = TEST_CELLS[EXACT[0]].source
    assert "draws=4000" in cell and "failure_prob=1.5e-7" in cell and "[(0, 2), (1, 3)]" in cell
    assert "range(1000)" in cell and "< 0.1" in cell and "below 5e-9" in cell
    assert 2 * 1.5e-7 + 2 * math.exp(-2 * 1000 * 0.1**2) < 1e-6
    assert 2 * math.exp(-2 * 1000 * 0.1**2) < 5e-9
    cell = TEST_CELLS[EXACT[1]].source
    assert "runs=3000" in cell and "failure_prob=9e-7" in cell
    assert "below 1e-6" in cell and "range(600)" in cell and "< 0.13" in cell
    assert "less than 5e-9" in cell
    assert 9e-7 + 2 * math.exp(-2 * 600 * 0.13**2) < 1e-6
    assert 2 * math.exp(-2 * 600 * 0.13**2) < 5e-9


def test_the_visible_exactness_checks_pass_the_reference_and_catch_the_mistakes():
    """The visible asserts pass the reference, and the node's catches the any-candidate
    rule, which emits token 0 there with probability 0.608 instead of p(0) = 0.8."""
    visible = {
        g: re.sub(
            r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", "", TEST_CELLS[g].source, flags=re.S
        )
        for g in EXACT
    }
    replace = {TEST_CELLS[g].source: visible[g] for g in EXACT}
    assert failing(execute(only=set(EXACT), replace=replace)) == {}
    lost = failing(execute(SCENARIOS["mistake-any-candidate"], only={EXACT[0]}, replace=replace))
    assert set(lost) == {EXACT[0]} and "p(0) = 0.8" in lost[EXACT[0]]


# ---------------------------------------------------------------------------
# The notebook's models are the reference's; docstrings; visible parts
# ---------------------------------------------------------------------------


def test_the_notebook_models_and_trees_are_the_reference_ones():
    """The visible n-gram builder gives specdec_reference.ngram's models bit for bit, and the
    visible draft_tree, topk_tree and tree_rows draw and score as
    specdec_reference.tree_decoding's."""
    from specdec_reference import ngram, tree_decoding
    from specdec_reference.testing import e7_5

    ns = LESSON.run(only=set()).namespace
    target, draft_model = e7_5.models()
    text = ngram.corpus_text()
    assert ns["ALPHABET"] == ngram.ALPHABET and ns["encode"](text) == ngram.encode(text)
    rng = np.random.default_rng(0)
    for _ in range(50):
        start = int(rng.integers(0, len(text) - 12))
        context = ns["encode"](text[start : start + int(rng.integers(1, 10))])
        for mine, ref in ((ns["target_model"], target), (ns["draft_model"], draft_model)):
            assert np.array_equal(mine.probs(context), ref.probs(context))
        mine = ns["draft_tree"](ns["draft_model"], context, (2, 2), np.random.default_rng(1))
        ref = tree_decoding.draft_tree(draft_model, context, (2, 2), np.random.default_rng(1))
        assert mine[0] == ref[0] and np.allclose(mine[1], ref[1])
        tree = ns["topk_tree"](ns["draft_model"], context, (3, 1))
        assert tree == tree_decoding.topk_tree(draft_model, context, (3, 1))
        assert np.allclose(
            ns["tree_rows"](ns["target_model"], context, tree),
            tree_decoding.tree_rows(target, context, tree),
        )


GRADED_PHRASES = {
    "tree_depths": ["number of edges from the root", "the root's is 0", "share a depth"],
    "tree_attention_mask": [
        "mask[i, j] is True when j is i or an ancestor of i",
        "never a sibling or a cousin",
        "exact values on random trees",
    ],
    "multi_draft_accept": [
        "min(1, r(x) / q(x))",
        "its residual against q",
        "from the last r",
        "order of your draws from rng is free",
        "how often each candidate is the accepted one",
        "(with 2 and 3)",
        "disjoint supports",
        "q = p accepts the first candidate",
    ],
    "verify_tree": [
        "bonus token",
        "target_rows[leaf]",
        "every candidate is accepted",
        "goes down to a leaf",
        "first 2 characters",
        "trees of depth 1",
        "replaced by correct ones",
    ],
    "greedy_verify_tree": [
        "any matching child may be followed",
        "target_argmax at its last node",
        "plain greedy decoding",
    ],
    "tree_expected_tokens": [
        "positional acceptance",
        "the root counts 1",
        "ranked by index",
        "0 past the end",
        "within 1e-9, rates[0] = 1 included",
    ],
    "chain_or_tree": [
        "a chain of budget drafted nodes",
        "grown best first",
        "within 1e-9, alpha = 1 included",
    ],
    "tree_cache_keep": [
        "position cached + i",
        "in order",
        "last emitted token has no entry yet",
        "cached = 0 included",
    ],
}


def test_the_measured_section_explains_why_the_chain_wins_here():
    text = " ".join(
        " ".join(c.source.split()) for c in LESSON.source_nb.cells if c.id == "md-measure"
    )
    assert "rises* with depth" in text and "a tree wins where" in text
