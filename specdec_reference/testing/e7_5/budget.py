"""Part 5: ``tree_expected_tokens`` and ``chain_or_tree`` against the reference."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ... import trees
from ..calls import call_or_fail
from ..compare import check_close
from ..convert import describe_call, unpack


def check_tree_expected_tokens(
    fn: Callable[..., Any], parents: Sequence[int], rates: Sequence[float]
) -> None:
    """Compare ``fn(parents, rates)`` with Sequoia's closed form; name the usual mistakes."""
    call = describe_call("tree_expected_tokens", list(parents), list(rates))
    got = call_or_fail(fn, list(parents), list(rates), call=call)
    expected = trees.tree_expected_tokens(parents, rates)
    depths = trees.tree_depths(parents)
    check_close(
        got,
        expected,
        call=call,
        atol=1e-9,
        mistakes={
            "the accepted drafted nodes without the target's own token": (
                expected - 1,
                "every pass also emits one target token: f(root) = 1 counts",
            ),
            "rates[0] at every node, whatever its rank": (
                sum(float(rates[0]) ** d for d in depths),
                "a node's factor is rates[rank], rank its position among its siblings",
            ),
        },
    )


def check_chain_or_tree(fn: Callable[..., Any], rates: Sequence[float], budget: int) -> None:
    """Compare ``fn(rates, budget)`` with the reference pair (chain, best tree)."""
    call = describe_call("chain_or_tree", list(rates), budget)
    got = unpack(call_or_fail(fn, list(rates), budget, call=call), ("chain", "tree"), call)
    chain, tree = trees.chain_or_tree(rates, budget)
    check_close(
        got[0],
        chain,
        call=call + "[0], the chain,",
        verb="is",
        atol=1e-9,
        mistakes={
            "a chain of budget - 1 nodes": (
                chain - float(rates[0]) ** budget if budget else None,
                "the chain drafts budget tokens: sum alpha**i, i = 0..budget",
            ),
        },
    )
    check_close(
        got[1],
        tree,
        call=call + "[1], the best tree,",
        verb="is",
        atol=1e-9,
        advice="grow the tree best first, adding the candidate node of highest score "
        "(the product of rates along its path), budget times",
        mistakes={
            "the chain again": (
                chain,
                "a tree with several children per node can do better: try every candidate child",
            )
        },
    )
