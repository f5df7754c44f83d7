"""The reference of lesson E7.5: tree structure, multi-draft acceptance, tree verification.

The statistical tests state their seed, their sample size and their false-failure
probability, and each is shown to fail on the mutants it is meant to catch: the
"any candidate" rule (every candidate tested against the original p, no residual update
between candidates), residuals taken from the original p instead of the last residual,
and resampling from p instead of the last residual.
"""

from __future__ import annotations

import numpy as np
import pytest

from specdec_reference import decoding, ngram, tree_cache, tree_decoding, trees
from specdec_reference.testing import e7_4
from specdec_reference.testing.e7_4.distribution import check_distribution

FAILURE = 1e-6


@pytest.fixture(scope="module")
def models():
    return e7_4.models()


def random_parents(rng: np.random.Generator, n: int) -> list[int]:
    return [-1] + [int(rng.integers(0, i)) for i in range(1, n)]


# ---------------------------------------------------------------------------
# Structure
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "parents, depths",
    [
        ([-1], [0]),
        ([-1, 0, 1, 2], [0, 1, 2, 3]),
        ([-1, 0, 0, 0], [0, 1, 1, 1]),
        ([-1, 0, 0, 1, 1, 2], [0, 1, 1, 2, 2, 2]),
    ],
)
def test_depths_are_path_lengths_not_indices(parents, depths):
    assert trees.tree_depths(parents) == depths


@pytest.mark.parametrize("bad", [[], [0], [-1, 1], [-1, 0, 3], [-1, -1]])
def test_a_parent_must_come_before_its_child(bad):
    with pytest.raises(ValueError):
        trees.tree_depths(bad)


@pytest.mark.parametrize("seed", range(20))
def test_the_mask_is_ancestry(seed):
    rng = np.random.default_rng(seed)
    parents = random_parents(rng, int(rng.integers(1, 25)))
    mask = trees.tree_attention_mask(parents)
    for i in range(len(parents)):
        ancestors, node = {i}, i
        while node > 0:
            node = parents[node]
            ancestors.add(node)
        assert {int(j) for j in np.flatnonzero(mask[i])} == ancestors
    assert mask.dtype == bool and not np.triu(mask, 1).any()


def test_siblings_do_not_see_each_other_and_a_chain_is_causal():
    mask = trees.tree_attention_mask([-1, 0, 0, 0])
    assert not mask[1, 2] and not mask[2, 1] and not mask[3, 1]
    chain = trees.tree_attention_mask([-1, 0, 1, 2, 3])
    assert np.array_equal(chain, np.tril(np.ones((5, 5), dtype=bool)))


# ---------------------------------------------------------------------------
# multi_draft_accept: exactness at one node, and the mutants
# ---------------------------------------------------------------------------


def _residual(p, q):
    r = np.maximum(p - q, 0.0)
    return r / r.sum() if r.sum() > 0 else p


def mutant_accept(mistake):
    def accept(p, q, candidates, rng):
        current = np.asarray(p, dtype=float)
        for j, x in enumerate(candidates):
            test = p if mistake == "any" else current
            if rng.random() < min(1.0, test[x] / q[x]):
                return x, j
            current = _residual(p, q) if mistake in ("any", "unchained") else _residual(current, q)
        last = p if mistake == "from-p" else current
        return int(rng.choice(len(p), p=last)), None

    return accept


def sample_node(accept, p, q, m, draws, seed):
    rng = np.random.default_rng(seed)
    counts: dict[int, int] = {}
    for _ in range(draws):
        candidates = [int(x) for x in rng.choice(len(q), size=m, p=q)]
        token, index = accept(p, q, candidates, rng)
        assert index is None or candidates[index] == token
        counts[token] = counts.get(token, 0) + 1
    return counts


# p and q far apart, chosen so that every mutant is at least 0.45 away from p in L1
# distance with 3 candidates: the first candidate is often rejected, so later ones matter.
P = np.array([0.48, 0.03, 0.02, 0.46, 0.01])
Q = np.array([0.0, 0.5, 0.13, 0.28, 0.09])


@pytest.mark.parametrize("m", [1, 2, 3, 5])
def test_multi_draft_accept_emits_the_target_distribution(m):
    """20,000 nodes (seed 750 + m), the L1 check with McDiarmid's bound at 1e-6."""
    counts = sample_node(trees.multi_draft_accept, P, Q, m, 20_000, 750 + m)
    check_distribution(counts, dict(enumerate(P)), call=f"m = {m}", failure_prob=FAILURE)


@pytest.mark.parametrize("mistake", ["any", "unchained", "from-p"])
def test_the_node_check_fails_each_mutant(mistake):
    m = 3
    counts = sample_node(mutant_accept(mistake), P, Q, m, 20_000, 760)
    with pytest.raises(AssertionError, match="L1 distance"):
        check_distribution(counts, dict(enumerate(P)), call=mistake, failure_prob=FAILURE)


@pytest.mark.parametrize("mistake", ["any", "unchained", "from-p"])
def test_the_exact_mutant_distributions_are_far_from_p(mistake):
    wrong = trees.multi_draft_distribution(P, Q, 3, mistake)
    assert abs(wrong.sum() - 1) < 1e-12
    assert np.abs(wrong - P).sum() > 0.15  # several times the check's tolerance (about 0.05)


@pytest.mark.parametrize("m", [0, 1, 2, 3, 5, 8])
def test_the_exact_distribution_of_the_rule_is_p(m):
    rng = np.random.default_rng(m)
    for _ in range(20):
        p, q = rng.dirichlet(np.ones(6) * 0.5), rng.dirichlet(np.ones(6) * 0.5)
        assert np.allclose(trees.multi_draft_distribution(p, q, m), p, atol=1e-12)


def test_disjoint_supports_never_accept_and_q_equal_p_accepts_the_first():
    p, q = np.array([0.5, 0.5, 0.0, 0.0]), np.array([0.0, 0.0, 0.5, 0.5])
    rng = np.random.default_rng(0)
    for _ in range(200):
        token, index = trees.multi_draft_accept(p, q, [2, 3, 2], rng)
        assert index is None and token in (0, 1)
        token, index = trees.multi_draft_accept(q, q, [3, 2], rng)
        assert (token, index) == (3, 0)


def test_multi_draft_accept_makes_one_uniform_per_tested_candidate():
    p, q = np.array([0.0, 1.0]), np.array([1.0, 0.0])
    rng, twin = np.random.default_rng(5), np.random.default_rng(5)
    assert trees.multi_draft_accept(p, q, [0, 0, 0], rng) == (1, None)
    twin.random(3)
    twin.choice(2, p=p)  # three uniforms, then one choice from the last residual
    assert rng.random() == twin.random()
    rng, twin = np.random.default_rng(6), np.random.default_rng(6)
    assert trees.multi_draft_accept(q, q, [0], rng) == (0, 0)
    twin.random()
    assert rng.random() == twin.random()


def test_three_candidates_at_half_acceptance_succeed_between_half_and_seven_eighths():
    """The predict-first question: 1 - 0.5**3 is what the biased rule always gives."""
    cases = {  # (p, q): chance that one of 3 candidates is accepted
        "q wider than p": (np.array([1.0, 0.0]), np.array([0.5, 0.5])),
        "disjoint residual": (np.array([0.5, 0.5, 0.0]), np.array([0.0, 0.5, 0.5])),
    }
    chances = {}
    for name, (p, q) in cases.items():
        assert abs(np.minimum(p, q).sum() - 0.5) < 1e-12
        current, alive = p, 1.0
        for _ in range(3):
            beta = np.minimum(current, q).sum()
            alive *= 1 - beta
            current = _residual(current, q)
        chances[name] = 1 - alive
    assert chances == {"q wider than p": 0.875, "disjoint residual": 0.5}


# ---------------------------------------------------------------------------
# verify_tree, greedy_verify_tree and the decoder
# ---------------------------------------------------------------------------


def test_verify_tree_returns_the_path_and_one_more_token(models):
    target, draft = models
    rng = np.random.default_rng(3)
    context = ngram.encode("def ")
    for _ in range(50):
        tree, q_rows = tree_decoding.draft_tree(draft, context, (3, 2, 1), rng)
        p_rows = tree_decoding.tree_rows(target, context, tree)
        emitted, path = trees.verify_tree(tree, p_rows, q_rows, rng)
        tokens, parents = tree
        assert len(emitted) == len(path) + 1
        assert [tokens[v] for v in path] == emitted[:-1]
        assert all(parents[b] == a for a, b in zip([0, *path], path, strict=False))


def test_a_tree_of_only_the_root_emits_one_target_token():
    rows = np.array([[0.0, 1.0]])
    assert trees.verify_tree(([0], [-1]), rows, rows, np.random.default_rng(0)) == ([1], [])


@pytest.mark.parametrize("seed", range(10))
def test_greedy_verify_tree_is_the_longest_matching_path(seed):
    rng = np.random.default_rng(seed)
    parents = random_parents(rng, 15)
    tokens = [int(x) for x in rng.integers(0, 3, 15)]
    best = [int(x) for x in rng.integers(0, 3, 15)]
    emitted, path = trees.greedy_verify_tree((tokens, parents), best)
    node = 0
    for v in path:
        assert parents[v] == node and tokens[v] == best[node]
        node = v
    kids = [c for c in range(15) if parents[c] == node and c]
    assert all(tokens[c] != best[node] for c in kids)
    assert emitted == [tokens[v] for v in path] + [best[node]]


@pytest.mark.parametrize(
    "prompt, widths", [("def ", (2, 2, 1)), ("import ", (3, 1)), ("    return ", (1, 1, 1, 1))]
)
def test_tree_decoding_at_temperature_zero_is_greedy_decoding(models, prompt, widths):
    target, draft = models
    context = ngram.encode(prompt)
    out, stats = tree_decoding.tree_decode(target, draft, context, 60, widths, None, 0)
    assert out == decoding.generate(target, context, 60, None, temperature=0)
    assert all(e == a + 1 for _, a, e in stats)


def mutant_verify(mistake):
    accept = mutant_accept(mistake)

    def verify(tree, p_rows, q_rows, rng):
        tokens, parents = tree
        kids = [[c for c in range(1, len(parents)) if parents[c] == i] for i in range(len(parents))]
        node, emitted, path = 0, [], []
        while kids[node]:
            token, index = accept(p_rows[node], q_rows[node], [tokens[c] for c in kids[node]], rng)
            emitted.append(token)
            if index is None:
                return emitted, path
            node = kids[node][index]
            path.append(node)
        emitted.append(int(rng.choice(p_rows.shape[1], p=p_rows[node])))
        return emitted, path

    return verify


def sequence_counts(models, verify, runs, seed, prompt="import ", widths=(3, 2), temperature=1.0):
    target, draft = models
    context = ngram.encode(prompt)
    rng = np.random.default_rng(seed)
    counts: dict[str, int] = {}
    for _ in range(runs):
        out, _ = tree_decoding.tree_decode(
            target, draft, context, 2, widths, rng, temperature, verify
        )
        text = ngram.decode(out)
        counts[text] = counts.get(text, 0) + 1
    exact = decoding.prefix_distribution(target, context, 2, temperature)
    probs = {
        ngram.decode(ix): float(exact[ix]) for ix in zip(*np.nonzero(exact >= 1e-4), strict=True)
    }
    return counts, probs


@pytest.mark.parametrize("temperature, seed", [(1.0, 7570), (0.6, 7571)])
def test_tree_decoding_samples_the_target_sequence_distribution(models, temperature, seed):
    """3,000 decodes of 2 characters with widths (3, 2), L1 check at 1e-6."""
    counts, probs = sequence_counts(models, None, 3000, seed, temperature=temperature)
    check_distribution(counts, probs, call="tree decode", failure_prob=FAILURE)


@pytest.mark.parametrize("mistake", ["any", "from-p"])
def test_the_sequence_check_fails_the_mutants(models, mistake):
    counts, probs = sequence_counts(models, mutant_verify(mistake), 3000, 7572)
    with pytest.raises(AssertionError, match="L1 distance"):
        check_distribution(counts, probs, call=mistake, failure_prob=FAILURE)


# ---------------------------------------------------------------------------
# Expected tokens: chain or tree
# ---------------------------------------------------------------------------


def test_a_chain_gives_the_geometric_sum():
    for alpha in (0.0, 0.3, 0.8, 1.0):
        for k in range(6):
            chain = [-1] + list(range(k))
            want = sum(alpha**i for i in range(k + 1))
            assert abs(trees.tree_expected_tokens(chain, [alpha, 0.1]) - want) < 1e-12


def test_the_best_tree_is_the_best_of_every_small_tree():
    """Exhaustive over every parent array of up to 6 drafted nodes."""
    import itertools

    rates = [0.45, 0.25, 0.1]
    for budget in range(1, 7):
        best = max(
            trees.tree_expected_tokens([-1, *rest], rates)
            for rest in itertools.product(*[range(i) for i in range(1, budget + 1)])
        )
        got = trees.tree_expected_tokens(trees.best_tree(rates, budget), rates)
        assert abs(got - best) < 1e-12, budget


def test_the_tree_never_loses_and_ties_when_only_the_first_child_counts():
    for rates in ([0.9, 0.05], [0.5, 0.3, 0.1], [0.2, 0.2, 0.2, 0.2]):
        for budget in (0, 1, 4, 16):
            chain, tree = trees.chain_or_tree(rates, budget)
            assert tree >= chain - 1e-12
    assert trees.chain_or_tree([0.7], 10)[0] == trees.chain_or_tree([0.7], 10)[1]
    chain, tree = trees.chain_or_tree([0.4, 0.3, 0.2], 16)
    assert tree > chain + 0.5  # a weak draft: the tree gains a lot


def test_best_tree_refuses_increasing_rates():
    with pytest.raises(ValueError):
        trees.best_tree([0.2, 0.5], 3)


# ---------------------------------------------------------------------------
# Which candidate is accepted: the closed form, and the rules that ignore the candidates
# ---------------------------------------------------------------------------


def sample_indices(accept, p, q, m, draws, seed):
    rng = np.random.default_rng(seed)
    counts: dict[object, int] = {}
    for candidates in rng.choice(len(q), size=(draws, m), p=q).tolist():
        _, index = accept(p, q, candidates, rng)
        key = "None" if index is None else index
        counts[key] = counts.get(key, 0) + 1
    return counts


def as_categories(probs):
    return {**dict(enumerate(probs[:-1].tolist())), "None": float(probs[-1])}


def lookup_accept(p, q, candidates, rng):
    """A token drawn from p, then looked up among the candidates: output p, wrong indices."""
    token = int(rng.choice(len(p), p=p))
    return token, next((j for j, x in enumerate(candidates) if x == token), None)


@pytest.mark.parametrize("m", [1, 2, 3, 5])
def test_the_accepted_index_follows_the_closed_form(m):
    """10,000 nodes (seed 770 + m), the L1 check with McDiarmid's bound at 1e-6: candidate j
    is accepted with probability beta_j * prod_{i<j} (1 - beta_i)."""
    p, q = np.array([0.4, 0.3, 0.2, 0.1, 0.0]), np.array([0.1, 0.15, 0.25, 0.2, 0.3])
    counts = sample_indices(trees.multi_draft_accept, p, q, m, 10_000, 770 + m)
    exact = trees.multi_draft_acceptance(p, q, m)
    check_distribution(counts, as_categories(exact), call=f"m = {m}", failure_prob=FAILURE)


@pytest.mark.parametrize("accept", [lookup_accept, mutant_accept("any")], ids=["lookup", "any"])
def test_the_index_check_fails_the_rules_that_accept_otherwise(accept):
    p, q = np.array([0.4, 0.3, 0.2, 0.1, 0.0]), np.array([0.1, 0.15, 0.25, 0.2, 0.3])
    counts = sample_indices(accept, p, q, 3, 10_000, 780)
    exact = as_categories(trees.multi_draft_acceptance(p, q, 3))
    with pytest.raises(AssertionError, match="L1 distance"):
        check_distribution(counts, exact, call="mutant", failure_prob=FAILURE)


@pytest.mark.parametrize("m", [0, 1, 2, 4])
def test_the_closed_form_sums_the_exact_distribution_over_accepted_and_rejected(m):
    """Enumerating every candidate tuple: P(index = j) from the rule's own probabilities."""
    import itertools

    rng = np.random.default_rng(m)
    for _ in range(10):
        p, q = rng.dirichlet(np.ones(4) * 0.7), rng.dirichlet(np.ones(4) * 0.7)
        want = np.zeros(m + 1)
        for cands in itertools.product(range(4), repeat=m):
            weight, alive, current = np.prod([q[x] for x in cands]), 1.0, p
            for j, x in enumerate(cands):
                accept = min(1.0, current[x] / q[x])
                want[j] += weight * alive * accept
                alive *= 1 - accept
                current = _residual(current, q)
            want[m] += weight * alive
        got = trees.multi_draft_acceptance(p, q, m)
        assert np.allclose(got, want, atol=1e-12) and abs(got.sum() - 1) < 1e-12


def test_some_candidate_is_accepted_with_one_minus_the_product_of_rejections():
    p, q = np.array([0.48, 0.03, 0.02, 0.46, 0.01]), np.array([0.0, 0.5, 0.13, 0.28, 0.09])
    betas, current = [], p
    for _ in range(3):
        betas.append(np.minimum(current, q).sum())
        current = _residual(current, q)
    accepted = 1 - trees.multi_draft_acceptance(p, q, 3)[-1]
    assert abs(accepted - (1 - np.prod([1 - b for b in betas]))) < 1e-12
    assert abs(betas[0] - 0.34) < 1e-12 and betas[2] == 0  # r_2 lies outside q's support


def test_spectr_example_a_better_exact_rule_exists():
    """p = (0.5, 0.5), q = (0.9, 0.1), two candidates: multi-step speculative sampling
    accepts 0.64; "1 if a candidate is 1, else 0 with probability 0.5 / 0.81" emits p and
    accepts 0.69, the bound sum_x min(p(x), P(x among the candidates))."""
    p, q = np.array([0.5, 0.5]), np.array([0.9, 0.1])
    assert abs(1 - trees.multi_draft_acceptance(p, q, 2)[-1] - 0.64) < 1e-12
    out, accepted = np.zeros(2), 0.0
    for a in range(2):
        for b in range(2):
            weight = q[a] * q[b]
            if 1 in (a, b):
                out[1] += weight
                accepted += weight
            else:  # both candidates are 0
                out[0] += weight * 0.5 / 0.81
                out[1] += weight * (1 - 0.5 / 0.81)
                accepted += weight * 0.5 / 0.81
    assert np.allclose(out, p) and abs(accepted - 0.69) < 1e-12
    bound = sum(min(p[x], 1 - (1 - q[x]) ** 2) for x in range(2))
    assert abs(bound - 0.69) < 1e-12


def test_a_top_k_node_tested_child_by_child_against_one_hot_drafts_is_naive_sampling():
    """Each child c a draw from delta_c: child j is accepted with p(c_j) exactly, so the
    output is p and the acceptance is p's mass on the children, at any temperature."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = rng.dirichlet(np.ones(8) * 0.5)
        children = [int(c) for c in rng.choice(8, size=3, replace=False)]
        out, alive, current = np.zeros(8), 1.0, p
        for c in children:
            q = np.eye(8)[c]
            out[c] += alive * min(1.0, current[c] / q[c])
            alive *= 1 - min(1.0, current[c] / q[c])
            current = _residual(current, q)
        out += alive * current
        assert np.allclose(out, p, atol=1e-12)
        assert abs((1 - alive) - p[children].sum()) < 1e-12


# ---------------------------------------------------------------------------
# The cache after a tree pass
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(10))
def test_the_kept_entries_are_those_of_the_text_the_next_pass_continues(seed):
    """A cache whose entries are tokens: after the gather it holds the context, the root and
    the accepted path's tokens, which is what a pass over that text alone would cache."""
    rng = np.random.default_rng(seed)
    parents = random_parents(rng, int(rng.integers(1, 15)))
    tokens = [int(t) for t in rng.integers(0, 96, len(parents))]
    context = [int(t) for t in rng.integers(0, 96, int(rng.integers(0, 8)))]
    path, node = [], 0
    while True:
        kids = [c for c in range(1, len(parents)) if parents[c] == node]
        if not kids or rng.random() < 0.3:
            break
        node = int(rng.choice(kids))
        path.append(node)
    cache = context + tokens  # the pass appended node i at len(context) + i
    kept = [cache[i] for i in tree_cache.tree_cache_keep(parents, path, len(context))]
    assert kept == context + [tokens[0]] + [tokens[v] for v in path]


@pytest.mark.parametrize(
    "parents, path, cached", [([-1, 0], [0], 1), ([-1, 0, 0], [1, 2], 0), ([-1, 0], [], -1)]
)
def test_tree_cache_keep_refuses_a_path_that_is_no_walk_from_the_root(parents, path, cached):
    with pytest.raises(ValueError):
        tree_cache.tree_cache_keep(parents, path, cached)
