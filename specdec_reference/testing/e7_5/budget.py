"""Part 5: ``tree_expected_tokens`` and ``chain_or_tree`` against the reference."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ... import trees
from ..calls import call_or_fail
from ..compare import check_close
from ..convert import describe_call, unpack

#: Said when a call at alpha = 1 raises or returns no number: the geometric closed form.
_ALPHA_ONE = (
    "a closed form dividing by 1 - alpha, which is 0 at alpha = 1",
    "at alpha = 1 every drafted node is accepted and adds 1 token; sum the terms, or "
    "treat alpha = 1 apart",
)


def _hint(rates: Sequence[float]) -> str:
    if rates and float(rates[0]) == 1.0:
        return f"That is {_ALPHA_ONE[0]}: {_ALPHA_ONE[1]}."
    return ""


def _not_a_number(got: float) -> bool:
    return got != got or abs(got) == float("inf")


def check_tree_expected_tokens(
    fn: Callable[..., Any], parents: Sequence[int], rates: Sequence[float]
) -> None:
    """Compare ``fn(parents, rates)`` with Sequoia's closed form; name the usual mistakes."""
    call = describe_call("tree_expected_tokens", list(parents), list(rates))
    got = call_or_fail(fn, list(parents), list(rates), call=call, hint=_hint(rates))
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
            _ALPHA_ONE[0]: (_not_a_number, _ALPHA_ONE[1]),
            "rates[0] at every node, whatever its rank": (
                sum(float(rates[0]) ** d for d in depths),
                "a node's factor is rates[rank], rank its position among its siblings",
            ),
        },
    )


def check_chain_or_tree(fn: Callable[..., Any], rates: Sequence[float], budget: int) -> None:
    """Compare ``fn(rates, budget)`` with the reference pair (chain, best tree)."""
    call = describe_call("chain_or_tree", list(rates), budget)
    got = unpack(
        call_or_fail(fn, list(rates), budget, call=call, hint=_hint(rates)), ("chain", "tree"), call
    )
    chain, tree = trees.chain_or_tree(rates, budget)
    check_close(
        got[0],
        chain,
        call=call + "[0], the chain,",
        verb="is",
        atol=1e-9,
        mistakes={
            _ALPHA_ONE[0]: (_not_a_number, _ALPHA_ONE[1]),
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
