"""What a learner who works their own numbers by hand types (lessons with variants)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specdec_reference.acceptance import accept_prob, overall_acceptance
from specdec_reference.analysis import expected_tokens
from specdec_reference.testing.e7_2.speed import part3_numbers
from specdec_reference.testing.e7_2.verification import _accepted


def e7_2_hand_worked(row: Mapping[str, Any]) -> dict[str, str]:
    """E7.2's answers worked by hand from ``row``'s numbers: literal values only, by
    solution cell (what a learner types, not an expression over ``MY_NUMBERS``)."""
    kept = _accepted(row)
    c = part3_numbers(row)
    e_n = expected_tokens(c["a"], c["k"])
    speed = e_n / (c["t_verify"] + c["k"] * c["t_draft"])
    letter = "ABC"[row["options"].split().index("ratio")]
    return {
        "part1_answers": f"answer_1 = {accept_prob(row['p1'], row['q1'])!r}\n"
        f"answer_2 = {accept_prob(row['p2'], row['q2'])!r}\n"
        f"answer_3 = {overall_acceptance(row['p3'], row['q3'])!r}",
        "one_pass_answers": f"accepted_tokens = {kept!r}\nstop_position = {len(kept) + 1}\n"
        f"tokens_emitted = {len(kept) + 1}\nanswer_e_n = {e_n!r}\nanswer_speed = {speed!r}\n"
        f"answer_speedup = {speed * c['t_target']!r}",
        "check_understanding": f"choice = {letter!r}",
    }


def e7_3_hand_worked(row: Mapping[str, Any]) -> dict[str, str]:
    """E7.3's Part 1 worked by hand from ``row``'s numbers: literal whole numbers."""
    from specdec_reference.testing.e7_3 import brute_force_count

    return {
        "part1_answers": f"brute_force_answer = {brute_force_count(row)}\n"
        f"tokens_if_first_rejected = 1\nmax_tokens = {row['k'] + 1}",
    }


def e7_1_hand_worked(row: Mapping[str, Any]) -> dict[str, str]:
    """E7.1's Part 1 and *Check your understanding* worked by hand from ``row``'s numbers:
    literal values only, by solution cell."""
    from specdec_reference.testing.e7_1 import choice_kinds, part1_answers

    answers = part1_answers(row)
    letter = next(letter for letter, kind in choice_kinds(row).items() if kind == "right")
    return {
        "part1_answers": "\n".join(f"{name} = {value!r}" for name, value in answers.items()),
        "check_understanding": f"choice = {letter!r}",
    }
