"""Regenerate the sample submissions of lesson E7.5 from the release notebook.

The scenarios are below; the engine that turns them into notebooks is
``tests/files/sample_builder.py`` (shared by every lesson).  ``reference`` is the source
notebook's own solutions, ``blank`` the release unchanged, and every other scenario starts
from the reference and replaces the solution cells it lists.  ``expected.json`` beside
this script gives each scenario's expected score on every test cell.

Usage (from the repository root)::

    python tests/files/e7_5_token_trees/build_samples.py            # write
    python tests/files/e7_5_token_trees/build_samples.py --check    # compare, exit 1 if stale
"""

from __future__ import annotations

import sys
from pathlib import Path

# multi_draft_accept as the docstring says, with the rejection and the fallback as lines
# that the mistakes below change.
_ACCEPT = """
current = np.asarray(p, dtype=float)
for j, x in enumerate(candidates):
    if rng.random() < min(1.0, TEST[x] / q[x]):
        return int(x), j
    REJECT
return int(rng.choice(len(FALLBACK), p=FALLBACK)), None
"""
_CHAINED = """leftover = np.maximum(current - q, 0.0)
    if leftover.sum() > 0:
        current = leftover / leftover.sum()"""


def accept(test: str = "current", reject: str = _CHAINED, fallback: str = "current") -> str:
    """multi_draft_accept testing against ``test``, updating with ``reject``, ending with
    a draw from ``fallback``."""
    return _ACCEPT.replace("TEST", test).replace("REJECT", reject).replace("FALLBACK", fallback)


# verify_tree as the docstring says, with what happens at a leaf as a line to change.
_VERIFY = """
tokens, parents = tree
children = [[] for _ in parents]
for i in range(1, len(parents)):
    children[parents[i]].append(i)
node, emitted, path = 0, [], []
while children[node]:
    token, index = multi_draft_accept(target_rows[node], draft_rows[node],
                                      [tokens[c] for c in children[node]], rng)
    emitted.append(token)
    if index is None:
        return emitted, path
    node = children[node][index]
    path.append(node)
LEAF
return emitted, path
"""
_BONUS = "emitted.append(int(rng.choice(len(target_rows[node]), p=target_rows[node])))"


def verify(leaf: str = _BONUS) -> str:
    return _VERIFY.replace("LEAF", leaf)


SCENARIOS: dict[str, dict[str, str]] = {
    "reference": {},
    "blank": {},
    # --- correct solutions written differently: full marks -------------------------
    # Plain Python lists and loops: ancestors walked one by one, residuals as lists,
    # children found by scanning, a recursive sum, a heap for the best-first tree.
    "variant-python-loops": {
        "tree_depths": """
            depths = []
            for parent in parents:
                depths.append(0 if parent < 0 else depths[parent] + 1)
            return depths
            """,
        "tree_attention_mask": """
            n = len(parents)
            rows = []
            for i in range(n):
                row = [False] * n
                node = i
                while node >= 0:  # i, its parent, its grandparent, ... the root
                    row[node] = True
                    node = parents[node]
                rows.append(row)
            return np.array(rows, dtype=bool).reshape(n, n)
            """,
        "multi_draft_accept": """
            r = [float(x) for x in p]
            qs = [float(x) for x in q]
            for index, x in enumerate(candidates):
                if rng.random() < min(1.0, r[x] / qs[x]):
                    return int(x), index
                left = [max(0.0, a - b) for a, b in zip(r, qs)]
                total = sum(left)
                if total > 0:
                    r = [v / total for v in left]
            return int(rng.choice(len(r), p=r)), None
            """,
        "verify_tree": """
            tokens, parents = tree
            node, emitted, path = 0, [], []
            while True:
                kids = [c for c in range(len(parents)) if parents[c] == node]
                if not kids:
                    row = target_rows[node]
                    emitted.append(int(rng.choice(len(row), p=row)))
                    return emitted, path
                token, index = multi_draft_accept(target_rows[node], draft_rows[node],
                                                  [tokens[c] for c in kids], rng)
                emitted.append(int(token))
                if index is None:
                    return emitted, path
                node = kids[index]
                path.append(node)
            """,
        "greedy_verify_tree": """
            tokens, parents = tree
            kids = {}
            for c in range(1, len(parents)):
                kids.setdefault(parents[c], []).append(c)
            node, emitted, path = 0, [], []
            while True:
                want = int(target_argmax[node])
                emitted.append(want)
                matches = [c for c in kids.get(node, []) if tokens[c] == want]
                if not matches:
                    return emitted, path
                node = matches[0]
                path.append(node)
            """,
        "tree_expected_tokens": """
            kids = [[] for _ in parents]
            for c in range(1, len(parents)):
                kids[parents[c]].append(c)

            def total(node, score):
                out = score
                for rank, c in enumerate(kids[node]):
                    out += total(c, score * (rates[rank] if rank < len(rates) else 0.0))
                return out

            return total(0, 1.0)
            """,
        "chain_or_tree": """
            import heapq

            chain, term = 1.0, 1.0
            for _ in range(budget):
                term *= rates[0]
                chain += term
            parents, scores = [-1], [1.0]
            heap = [(-rates[0], 0, 0)]  # (-score, parent, rank) of each node's next child
            while heap and len(parents) <= budget:
                neg, parent, rank = heapq.heappop(heap)
                parents.append(parent)
                scores.append(-neg)
                if rank + 1 < len(rates):
                    heapq.heappush(heap, (-scores[parent] * rates[rank + 1], parent, rank + 1))
                heapq.heappush(heap, (-scores[-1] * rates[0], len(parents) - 1, 0))
            return chain, tree_expected_tokens(parents, rates)
            """,
        "tree_cache_keep": """
            keep = []
            for position in range(cached):
                keep.append(position)
            keep.append(cached)  # the root
            for node in path:
                keep.append(cached + node)
            return keep
            """,
    },
    # numpy everywhere: pointer jumping for depths and masks, every uniform of a call drawn
    # at once and the fallback by inverting the CDF, numpy ints and arrays as results.
    "variant-numpy": {
        "tree_depths": """
            par = np.asarray(parents, dtype=np.int64)
            depth = np.zeros(len(par), dtype=np.int64)
            node = par.copy()
            while (node >= 0).any():  # climb one level at a time, every node at once
                alive = node >= 0
                depth += alive
                node = np.where(alive, par[np.maximum(node, 0)], -1)
            return depth
            """,
        "tree_attention_mask": """
            par = np.asarray(parents, dtype=np.int64)
            n = len(par)
            mask = np.eye(n, dtype=bool)
            rows, node = np.arange(n), par.copy()
            while (node >= 0).any():
                alive = node >= 0
                mask[rows[alive], node[alive]] = True
                node = np.where(alive, par[np.maximum(node, 0)], -1)
            return mask
            """,
        "multi_draft_accept": """
            r = np.asarray(p, dtype=np.float64)
            q = np.asarray(q, dtype=np.float64)
            cand = np.asarray(candidates, dtype=np.int64)
            u = rng.random(cand.size)
            for j in range(cand.size):
                if u[j] * q[cand[j]] < r[cand[j]]:
                    return cand[j], j
                left = np.clip(r - q, 0.0, None)
                if left.sum() > 0:
                    r = left / left.sum()
            cdf = np.cumsum(r)
            x = np.searchsorted(cdf, rng.random() * cdf[-1], side="right")
            return min(int(x), len(cdf) - 1), None
            """,
        "verify_tree": """
            tokens, parents = np.asarray(tree[0]), np.asarray(tree[1])
            node, emitted, path = 0, [], []
            kids = np.flatnonzero(parents == node)
            while kids.size:
                token, index = multi_draft_accept(target_rows[node], draft_rows[node],
                                                  tokens[kids].tolist(), rng)
                emitted.append(token)
                if index is None:
                    return np.array(emitted), np.array(path, dtype=np.int64)
                node = int(kids[index])
                path.append(node)
                kids = np.flatnonzero(parents == node)
            emitted.append(rng.choice(target_rows.shape[1], p=target_rows[node]))
            return np.array(emitted), np.array(path, dtype=np.int64)
            """,
        "greedy_verify_tree": """
            tokens, parents = np.asarray(tree[0]), np.asarray(tree[1])
            best = np.asarray(target_argmax)
            node, emitted, path = 0, [best[0]], []
            while True:
                match = np.flatnonzero((parents == node) & (tokens == best[node]))
                if match.size == 0:
                    return np.array(emitted), np.array(path, dtype=np.int64)
                node = int(match[0])
                path.append(node)
                emitted.append(best[node])
            """,
        "tree_expected_tokens": """
            par = np.asarray(parents, dtype=np.int64)
            rate = np.append(np.asarray(rates, dtype=np.float64), 0.0)
            score = np.ones(len(par))
            for i in range(1, len(par)):
                rank = np.count_nonzero(par[1:i] == par[i])  # elder siblings
                score[i] = score[par[i]] * rate[min(rank, len(rate) - 1)]
            return np.float64(score.sum())
            """,
        "chain_or_tree": """
            r = np.asarray(rates, dtype=np.float64)
            chain = np.sum(r[0] ** np.arange(budget + 1))
            parents, score, kids = [-1], np.ones(1), np.zeros(1, dtype=np.int64)
            for _ in range(budget):
                ok = kids < len(r)
                if not ok.any():
                    break
                value = np.where(ok, score * r[np.minimum(kids, len(r) - 1)], -1.0)
                v = int(np.argmax(value))
                parents.append(v)
                score = np.append(score, value[v])
                kids[v] += 1
                kids = np.append(kids, 0)
            return chain, tree_expected_tokens(parents, r.tolist())
            """,
        "tree_cache_keep": """
            nodes = np.concatenate([[0], np.asarray(path, dtype=np.int64)]).astype(np.int64)
            return np.concatenate([np.arange(cached), cached + nodes])
            """,
    },
    # --- common mistakes -------------------------------------------------------------
    "mistake-indices-as-depths": {
        "tree_depths": """
            return list(range(len(parents)))
            """,
    },
    # The sequence's causal mask: every earlier node, elder siblings and cousins too.
    "mistake-causal-mask": {
        "tree_attention_mask": """
            return np.tril(np.ones((len(parents), len(parents)), dtype=bool))
            """,
    },
    # The ancestors, and the elder siblings as well.
    "mistake-siblings-see-each-other": {
        "tree_attention_mask": """
            n = len(parents)
            mask = np.eye(n, dtype=bool)
            for i in range(1, n):
                mask[i] |= mask[parents[i]]
            for i in range(1, n):
                for j in range(1, i):
                    if parents[j] == parents[i]:
                        mask[i, j] = True  # a sibling: the same place in the text
            return mask
            """,
    },
    # "Accept if any candidate passes": every candidate against the original p, no
    # residual update between candidates, the residual of p at the end.
    "mistake-any-candidate": {
        "multi_draft_accept": accept(
            test="p",
            reject="pass",
            fallback="np.maximum(p - q, 0.0) / np.maximum(p - q, 0.0).sum()",
        ),
    },
    # The update forgotten: each rejection computes the residual of the current distribution
    # into a new name, but the current distribution is never replaced, so every candidate
    # is tested against the original p and the fallback is the residual of p. The same wrong
    # distribution as the any-candidate rule, reached by a different slip.
    "mistake-no-residual-update": {
        "multi_draft_accept": """
            current = np.asarray(p, dtype=float)
            residual = current
            for j, x in enumerate(candidates):
                if rng.random() < min(1.0, current[x] / q[x]):
                    return int(x), j
                leftover = np.maximum(current - q, 0.0)
                if leftover.sum() > 0:
                    residual = leftover / leftover.sum()  # but current stays p
            return int(rng.choice(len(residual), p=residual)), None
            """,
    },
    # The residuals chained, but the fallback drawn from p itself.
    "mistake-resample-from-p": {"multi_draft_accept": accept(fallback="p")},
    # Multi-step speculative sampling skipped: the token drawn from p, the candidates never
    # tested. Its output is exactly p, but it never accepts a candidate.
    "mistake-accept-samples-p": {
        "multi_draft_accept": """
            return int(rng.choice(len(p), p=p)), None
            """,
    },
    # A token drawn from p, then looked up among the candidates: exact in output, but it
    # accepts as often as p lands on a candidate, not as the multi-step test does.
    "mistake-accept-p-lookup": {
        "multi_draft_accept": """
            token = int(rng.choice(len(p), p=p))
            for j, x in enumerate(candidates):
                if x == token:
                    return token, j
            return token, None
            """,
    },
    "mistake-no-bonus-token": {"verify_tree": verify(leaf="pass")},
    # The tree ignored: one token from the root's target row, an empty path. Exact in
    # distribution, but it accepts nothing.
    "mistake-verify-ignores-tree": {
        "verify_tree": """
            row = target_rows[0]
            return [int(rng.choice(len(row), p=row))], []
            """,
    },
    # One level walked (an if where a loop belongs), then a "bonus" from the accepted
    # child's row even when that child has children.
    "mistake-verify-one-level": {
        "verify_tree": verify().replace("while children[node]:", "if children[node]:"),
    },
    # The bonus token drawn from the draft's row at the leaf.
    "mistake-verify-bonus-from-draft": {
        "verify_tree": verify(
            leaf="emitted.append(int(rng.choice(len(draft_rows[node]), p=draft_rows[node])))"
        ),
    },
    "mistake-greedy-no-target-token": {
        "greedy_verify_tree": """
            tokens, parents = tree
            node, emitted, path = 0, [], []
            while True:
                match = next((c for c in range(1, len(parents))
                              if parents[c] == node and tokens[c] == target_argmax[node]), None)
                if match is None:
                    return emitted, path
                node = match
                emitted.append(int(tokens[node]))
                path.append(node)
            """,
    },
    "mistake-expected-without-target-token": {
        "tree_expected_tokens": """
            score, seen, total = [1.0] * len(parents), [0] * len(parents), 0.0
            for i in range(1, len(parents)):
                rank = seen[parents[i]]
                seen[parents[i]] += 1
                score[i] = score[parents[i]] * (rates[rank] if rank < len(rates) else 0.0)
                total += score[i]
            return total
            """,
    },
    # The geometric closed forms, which divide by 1 - alpha: 0 at alpha = 1.
    "mistake-closed-form-at-alpha-one": {
        "tree_expected_tokens": """
            kids = [0] * len(parents)
            for i in range(1, len(parents)):
                kids[parents[i]] += 1
            if max(kids) <= 1:  # a chain: the geometric sum in closed form
                a, k = rates[0], len(parents) - 1
                return (1 - a ** (k + 1)) / (1 - a)
            score, seen, total = [1.0] * len(parents), [0] * len(parents), 1.0
            for i in range(1, len(parents)):
                rank = seen[parents[i]]
                seen[parents[i]] += 1
                score[i] = score[parents[i]] * (rates[rank] if rank < len(rates) else 0.0)
                total += score[i]
            return total
            """,
        "chain_or_tree": """
            a = rates[0]
            chain = (1 - a ** (budget + 1)) / (1 - a)
            parents, score, kids = [-1], [1.0], [0]
            for _ in range(budget):
                options = [(score[v] * rates[kids[v]], v) for v in range(len(parents))
                           if kids[v] < len(rates)]
                if not options:
                    break
                best, parent = max(options)
                parents.append(parent)
                score.append(best)
                kids.append(0)
                kids[parent] += 1
            return chain, tree_expected_tokens(parents, rates)
            """,
    },
    # The cache truncated as after a chain: every node fed before the last accepted one
    # stays, rejected siblings included.
    "mistake-cache-truncates": {
        "tree_cache_keep": """
            return list(range(cached + 1 + (path[-1] if path else 0)))
            """,
    },
    "mistake-imports-reference": {
        "tree_depths": """
            from specdec_reference import tree_depths as reference

            return reference(parents)
            """,
    },
}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/files: the engine
    from sample_builder import main

    sys.exit(main(Path(__file__).resolve().parent, SCENARIOS))
