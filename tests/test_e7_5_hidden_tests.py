"""Lesson E7.5: the hidden tests grade fairly, catch every mistake once and say which one.

The source notebook's test cells run here in this process (``support.lessons.Lesson``),
after learner code built from solution bodies (the samples' and the extra mutants
below).  Which cells each sample loses is checked through the real grader by
test_lessons.py (``expected.json``); here the messages are checked, and mutants without a
sample notebook.  The reference's own tests are in test_reference_trees.py, the helpers'
in test_e7_5_checks.py.
"""

from __future__ import annotations

import ast
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


def execute(bodies=None, *, only=None, replace=None):
    return LESSON.run(bodies, only=only, replace=replace).outcomes


# ---------------------------------------------------------------------------
# Correct solutions get full marks
# ---------------------------------------------------------------------------


def test_the_reference_solutions_pass_every_test_cell():
    outcomes = execute()
    assert set(outcomes) == set(TEST_CELLS)
    assert failing(outcomes) == {}


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.startswith("variant-")])
def test_correct_variants_pass_every_test_cell(scenario):
    """Python lists and loops; numpy everywhere, with other draws in multi_draft_accept."""
    assert failing(execute(SCENARIOS[scenario])) == {}


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


def test_broken_callees_cost_nothing_in_the_cells_that_use_them():
    """No cascade: multi_draft_accept and tree_expected_tokens are the reference's in the
    cells of verify_tree and chain_or_tree."""
    broken = {
        "multi_draft_accept": "raise NotImplementedError()",
        "tree_expected_tokens": "return 0.0",
    }
    lost = failing(execute(broken, only=VERIFY_CELLS | BUDGET_CELLS))
    assert set(lost) == {"test_tree_expected_tokens_values"}, lost


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
        "test_multi_draft_accept_exact": "the any-candidate rule (each candidate tested against "
        "the original p, no residual update between candidates)",
    },
    "mistake-no-residual-update": {
        "test_multi_draft_accept_exact": "no residual update between candidates",
    },
    "mistake-resample-from-p": {
        "test_multi_draft_accept_exact": "resampling from p instead of the last residual",
    },
    "mistake-no-bonus-token": {"test_verify_tree_paths": "That is the missing bonus token"},
    "mistake-greedy-no-target-token": {
        "test_greedy_verify_tree_values": "the path's tokens without the target's own token",
        "test_greedy_verify_tree_decoding": "it must emit at least the target's own token",
    },
    "mistake-expected-without-target-token": {
        "test_tree_expected_tokens_values": "without the target's own token",
    },
}


def test_every_sample_mistake_has_its_messages():
    assert LESSON.message_coverage_problems(SAMPLE_MESSAGES) == []


@pytest.mark.parametrize("scenario", sorted(SAMPLE_MESSAGES))
def test_each_sample_mistake_fails_its_cells_with_a_message_naming_it(scenario):
    assert LESSON.message_problems(scenario, SAMPLE_MESSAGES[scenario]) == []


def test_a_notebook_importing_the_reference_fails_every_cell():
    assert LESSON.reference_import_problems() == []


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
        {"test_multi_draft_accept_exact": "every residual taken from the original p"},
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


@pytest.mark.parametrize("name", sorted(EXTRA_MUTANTS))
def test_extra_mutants_lose_exactly_their_cells(name):
    bodies, cells, expected = EXTRA_MUTANTS[name]
    lost = failing(execute(bodies, only=cells))
    assert set(lost) == set(expected), lost
    for gid, words in expected.items():
        assert words in lost[gid], f"{gid}: {lost[gid]}"


# ---------------------------------------------------------------------------
# The statistical checks: other seeds, stated bounds
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scenario", ["mistake-any-candidate", "mistake-no-residual-update", "mistake-resample-from-p"]
)
def test_the_node_check_fails_the_acceptance_mistakes_for_other_seeds(scenario):
    """The reference passes the same checks for many seeds: test_reference_trees."""
    lost = failing(
        execute(
            SCENARIOS[scenario], only={EXACT[0]}, replace={"seed=7510 + _case": "seed=8510 + _case"}
        )
    )
    assert set(lost) == {EXACT[0]}


def test_the_statistical_cells_state_a_false_failure_probability_below_one_in_a_million():
    cell = TEST_CELLS[EXACT[0]].source
    assert "draws=4000" in cell and "failure_prob=1.5e-7" in cell and "(2, 3, 5)" in cell
    assert "range(1000)" in cell and "< 0.1" in cell and "below 5e-9" in cell
    assert 2 * 3 * 1.5e-7 + 2 * math.exp(-2 * 1000 * 0.1**2) < 1e-6
    assert 2 * math.exp(-2 * 1000 * 0.1**2) < 5e-9
    cell = TEST_CELLS[EXACT[1]].source
    assert "runs=3000" in cell and "failure_prob=9e-7" in cell and "below 1e-6" in cell
    assert "range(600)" in cell and "< 0.13" in cell and "less than 5e-9" in cell
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
    visible draft_tree, topk_tree and tree_rows draw and score as specdec_reference.trees."""
    from specdec_reference import ngram, trees
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
        ref = trees.draft_tree(draft_model, context, (2, 2), np.random.default_rng(1))
        assert mine[0] == ref[0] and np.allclose(mine[1], ref[1])
        tree = ns["topk_tree"](ns["draft_model"], context, (3, 1))
        assert tree == trees.topk_tree(draft_model, context, (3, 1))
        assert np.allclose(
            ns["tree_rows"](ns["target_model"], context, tree),
            trees.tree_rows(target, context, tree),
        )


GRADED_PHRASES = {
    "tree_depths": ["depths[i] = depths[parents[i]] + 1", "siblings", "share a depth"],
    "tree_attention_mask": [
        "mask[i, j] is True when j is i or an ancestor of i",
        "never a sibling or a cousin",
        "exact values on random trees",
    ],
    "multi_draft_accept": [
        "rng.random() < min(1, r(x) / q(x))",
        "max(0, r - q), normalized",
        "from the last r",
        "2, 3 and 5 candidates",
        "disjoint supports",
        "q = p accepts the first candidate",
    ],
    "verify_tree": [
        "bonus token",
        "target_rows[leaf]",
        "first 2 characters",
        "replaced by a correct one",
    ],
    "greedy_verify_tree": [
        "any matching child may be followed",
        "target_argmax at its last node",
        "plain greedy decoding",
    ],
    "tree_expected_tokens": ["f(root) = 1", "ranked by index", "0 past the end", "within 1e-9"],
    "chain_or_tree": ["1 + alpha + ... + alpha ** budget", "grown best", "within 1e-9"],
}


@pytest.mark.parametrize("grade_id", sorted(GRADED_PHRASES))
def test_each_docstring_states_the_graded_behaviour(grade_id):
    assert LESSON.missing_docstring_phrases(grade_id, GRADED_PHRASES[grade_id]) == []


def test_docstring_examples_hold_for_the_reference_solutions():
    examples, failures = LESSON.docstring_examples(GRADED_PHRASES)
    assert examples >= len(GRADED_PHRASES) and failures == 0


def test_visible_asserts_never_depend_on_hidden_helpers():
    assert LESSON.hidden_names_in_visible_asserts(("_e75", "_checks", "_ref", "_np")) == []


def test_the_cells_calling_reference_callees_read_no_substituted_name():
    """The grader flags a test cell that reads a name an earlier test cell rebound."""
    substituted = set()
    for gid, cell in TEST_CELLS.items():
        names = {n.id for n in ast.walk(ast.parse(cell.source)) if isinstance(n, ast.Name)}
        assert not (names & substituted), f"{gid} reads {names & substituted}"
        substituted |= set(re.findall(r'use_reference_for_cell\(globals\(\), "(\w+)"', cell.source))


def test_the_measured_section_explains_why_the_chain_wins_here():
    text = " ".join(
        " ".join(c.source.split()) for c in LESSON.source_nb.cells if c.id == "md-measure"
    )
    assert "rises* with depth" in text and "a tree wins where" in text
