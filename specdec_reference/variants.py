"""Each learner's own numbers for the questions a lesson asks to work by hand.

A lesson that declares a variant space here gives every learner one row of its table:
the row is chosen by SHA-256 of the course's variant key, the assignment and the
learner's folded id (:func:`variant_index`).  Without a key every learner gets row 0,
the numbers the lesson printed before it had variants; with one, another row.  The same
derivation runs in two places:

* in the learner's notebook, as the code of the lesson's *Your numbers* cell, which
  :func:`learner_cell_source` writes (the cell needs no package: learners do not have
  this one), with the id the learner typed or the hub's ``JUPYTERHUB_USER``;
* in the hidden tests, through :func:`graded_numbers`, with the key and the id the grader
  wrote into the test cell's own source (never anything the learner's code set).

Each row keeps the lesson's teaching points (an over-confident token, a rejection
before a token whose ratio is above 1, a speed-up above 1); the project's tests check
every row of every table against the hidden checks.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from specdec_reference import roofline, specs

#: What the *Your numbers* cell and the hidden tests assign, and the grader fills in.
KEY_NAME = "COURSE_VARIANT_KEY"
STUDENT_NAME = "GRADED_STUDENT_ID"
#: The cell a learner types an id into on a laptop.
TYPED_NAME = "MY_STUDENT_ID"
#: The learner's row, as the *Your numbers* cell leaves it in the notebook.
NUMBERS_NAME = "MY_NUMBERS"


def fold_id(student: str) -> str:
    """Return ``student`` as the derivation hashes it: accents folded to ASCII, lower
    case, runs of anything outside ``[a-z0-9._-]`` one ``_``, no edge punctuation.

    >>> fold_id("  Zoë Müller ")
    'zoe_muller'
    """
    folded = unicodedata.normalize("NFKD", student).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9._-]+", "_", folded.lower()).strip("._-")


def variant_index(key: str, assignment: str, student: str, size: int) -> int:
    """Return the row (0 to ``size - 1``) of ``student`` in ``assignment`` under ``key``.

    Row 0, the numbers the lesson printed before it had variants, when ``key`` is empty:
    every learner then gets it.  With a key, one of the other rows: the prose may work
    row 0's example through, so no keyed learner gets numbers answered on the page.
    """
    if not key:
        return 0
    text = "\n".join((key, assignment, fold_id(student)))
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return 1 + int.from_bytes(digest[:8], "big") % (size - 1)


@dataclass(frozen=True)
class VariantSpace:
    """One lesson's table of numbers and how its *Your numbers* cell shows a row."""

    assignment: str
    #: the rows; row 0 is the lesson's printed numbers
    rows: tuple[Mapping[str, Any], ...]
    #: the lines the cell prints, ``str.format`` templates over a row, each with the
    #: solution cell (``grade_id``) whose question it gives numbers for
    lines: tuple[tuple[str, str], ...]

    def index(self, key: str, student: str) -> int:
        return variant_index(key, self.assignment, student, len(self.rows))

    def numbers(self, key: str, student: str) -> dict[str, Any]:
        """The row of ``student``, with its index as ``"variant"``."""
        i = self.index(key, student)
        return {"variant": i, **self.rows[i]}

    def describe(self, row: Mapping[str, Any], answer: str | None = None) -> list[str]:
        """The lines the *Your numbers* cell prints for ``row``: all of them, or those of
        the solution cell ``answer``."""
        return [line.format(**row) for gid, line in self.lines if answer in (None, gid)]


def _e7_1_row(part1, understanding) -> dict[str, Any]:
    model, hardware, k = part1
    cu_hardware, sequences, seq_len, options = understanding
    card = next(h for h in specs.HARDWARE if h["name"] == cu_hardware)
    ridge = roofline.ridge_batch(specs.LLAMA2_7B, card)
    weights_k = max(1, -(-ridge // sequences) - 1)
    right_k = _e7_1_smallest_k(card, sequences, seq_len)
    offers = {
        "weights": (
            weights_k,
            f"{weights_k}, since {sequences} x {weights_k + 1} = {sequences * (weights_k + 1)} "
            f"positions pass the ridge batch of {ridge}",
        ),
        "right": (right_k, str(right_k)),
        "ridge": (ridge - 1, f"{ridge - 1}, the ridge batch less one"),
        "none": (None, "none: a pass that reads every cache is memory-bound whatever k is"),
    }
    letters = list(zip("ABCD", options.split(), strict=True))
    return {
        "model": model, "hardware": hardware, "k": k,
        "cu_hardware": cu_hardware, "sequences": sequences, "seq_len": seq_len,
        "options": options,
        "offers": {letter: offers[kind][0] for letter, kind in letters},
        **{f"choice_{letter}": offers[kind][1] for letter, kind in letters},
    }  # fmt: skip


def _e7_1_smallest_k(card: Mapping[str, Any], sequences: int, seq_len: int) -> int:
    """The smallest k >= 1 at which one pass verifying k drafted tokens for each of
    ``sequences`` Llama-2-7B sequences of ``seq_len`` cached positions is compute-bound:
    the pass reads the weights and every cache once and does ``sequences * (k + 1)``
    positions' arithmetic."""
    model = specs.LLAMA2_7B
    read = roofline.weight_bytes(model["params"], model["bytes_per_param"])
    read += roofline.model_cache_bytes(model, seq_len, sequences)
    memory = read / card["bandwidth"]
    per_position = roofline.flops_per_token(model["params"]) / card["peak_flops"]
    k = 1
    while sequences * (k + 1) * per_position <= memory:  # a tie is memory-bound
        k += 1
    return k


#: Lesson E7.1's variants: Part 1's model, card and draft length (the step stays
#: memory-bound, and so does the pass over k + 1 positions), and *Check your
#: understanding*'s card, batch and context for Llama-2-7B (the batch fits; the weights'
#: ridge, the ridge batch less one and "none" are the wrong options, in a letter order of
#: the row's).  Rows leave out the pairs whose times the page prints (Llama-2-70B on the
#: H100 is the step_time docstring's example).
E7_1 = VariantSpace(
    assignment="e7_1_why_decoding_is_slow",
    rows=tuple(
        _e7_1_row(*row)
        for row in (
            (
                ("Llama-2-7B", "A100 SXM 80 GB", 4),
                ("A100 SXM 80 GB", 60, 2048, "weights right ridge none"),
            ),
            (("Llama-2-7B", "H100 SXM", 15), ("H100 SXM", 40, 1024, "right none weights ridge")),
            (
                ("Llama-2-70B", "A100 SXM 80 GB", 3),
                ("A100 SXM 80 GB", 30, 1024, "ridge weights none right"),
            ),
            (
                ("Llama-2-7B", "GeForce RTX 4090", 5),
                ("GeForce RTX 4090", 16, 512, "none ridge right weights"),
            ),
            (
                ("Llama-2-7B", "Apple M2 CPU (laptop)", 3),
                ("A100 SXM 80 GB", 48, 512, "weights ridge right none"),
            ),
            (
                ("Llama-2-70B", "GeForce RTX 4090", 6),
                ("H100 SXM", 60, 512, "ridge right none weights"),
            ),
            (
                ("Llama-2-70B", "A100 SXM 80 GB", 6),
                ("GeForce RTX 4090", 30, 512, "none weights ridge right"),
            ),
            (
                ("Llama-2-7B", "H100 SXM", 19),
                ("A100 SXM 80 GB", 24, 2048, "right weights ridge none"),
            ),
        )
    ),  # fmt: skip
    lines=(
        (
            "part1_answers",
            "Part 1: {model} in 16-bit on the {hardware}; the draft has k = {k} tokens",
        ),
        (
            "check_understanding",
            "Check your understanding: Llama-2-7B on the {cu_hardware}, {sequences} "
            "sequences of {seq_len} cached positions",
        ),
        *(("check_understanding", f"  {letter}: {{choice_{letter}}}") for letter in "ABCD"),
    ),  # fmt: skip
)


def _e7_2_row(part1, trace, speed, understanding) -> dict[str, Any]:
    (q1, p1), (q2, p2), (p3, q3) = part1
    tq, tp, tr = (list(values) for values in trace)
    a, k, t_verify, t_draft, t_target = speed
    up0, uq0, options = understanding
    offers = {
        "agree": "1, the two models agree on the top choice",
        "ratio": str(Fraction(str(up0)) / Fraction(str(uq0))),
        "raw": f"{up0}, the target's probability of the token",
    }
    letters = zip("ABC", options.split(), strict=True)
    choices = "; ".join(f"{letter}: {offers[kind]}" for letter, kind in letters)
    return {
        "q1": q1, "p1": p1, "q2": q2, "p2": p2, "p3": p3, "q3": q3,
        "trace_q": tq, "trace_p": tp, "trace_r": tr,
        "a": a, "k": k, "t_verify_ms": t_verify, "t_draft_ms": t_draft, "t_target_ms": t_target,
        "choice_p": [up0, round(1 - up0, 10)], "choice_q": [uq0, round(1 - uq0, 10)],
        "options": options, "choices": choices,
    }  # fmt: skip


#: Lesson E7.2's variants.  ``options`` says what each letter of *Check your
#: understanding* offers: ``agree`` (1, the models agree), ``ratio`` (p/q), ``raw`` (p).
E7_2 = VariantSpace(
    assignment="e7_2_acceptance_tests",
    rows=tuple(
        _e7_2_row(*row)
        for row in (
            (
                ((0.6, 0.15), (0.2, 0.3), ([0.6, 0.1, 0.3], [0.2, 0.5, 0.3])),
                ((0.2, 0.5, 0.8, 0.3), (0.8, 0.3, 0.2, 0.9), (0.5, 0.45, 0.4, 0.1)),
                (0.6, 3, 14, 2, 12),
                (0.6, 0.9, "agree ratio raw"),
            ),
            (
                ((0.5, 0.2), (0.1, 0.4), ([0.6, 0.3, 0.1], [0.3, 0.2, 0.5])),
                ((0.4, 0.6, 0.5, 0.2), (0.8, 0.3, 0.1, 0.6), (0.3, 0.4, 0.3, 0.5)),
                (0.5, 3, 12, 1, 10),
                (0.6, 0.8, "ratio raw agree"),
            ),
            (
                ((0.9, 0.45), (0.25, 0.5), ([0.2, 0.5, 0.3], [0.4, 0.2, 0.4])),
                ((0.5, 0.6, 0.25, 0.4), (0.4, 0.2, 0.5, 0.8), (0.6, 0.5, 0.2, 0.3)),
                (0.7, 2, 15, 2.5, 12),
                (0.7, 0.9, "raw agree ratio"),
            ),
            (
                ((0.8, 0.6), (0.3, 0.45), ([0.1, 0.7, 0.2], [0.5, 0.3, 0.2])),
                ((0.3, 0.7, 0.9, 0.1), (0.6, 0.35, 0.3, 0.5), (0.7, 0.3, 0.5, 0.2)),
                (0.8, 3, 16, 2, 14),
                (0.55, 0.88, "agree raw ratio"),
            ),
            (
                ((0.4, 0.1), (0.15, 0.6), ([0.5, 0.25, 0.25], [0.2, 0.2, 0.6])),
                ((0.6, 0.4, 0.8, 0.25), (0.2, 0.2, 0.4, 0.75), (0.25, 0.7, 0.1, 0.6)),
                (0.5, 4, 10, 1.5, 10),
                (0.6, 0.75, "ratio agree raw"),
            ),
            (
                ((0.5, 0.35), (0.4, 0.5), ([0.3, 0.3, 0.4], [0.6, 0.3, 0.1])),
                ((0.1, 0.5, 0.6, 0.4), (0.3, 0.45, 0.15, 0.8), (0.9, 0.6, 0.5, 0.3)),
                (0.75, 2, 16, 2, 12),
                (0.7, 0.875, "raw ratio agree"),
            ),
            (
                ((0.75, 0.3), (0.2, 0.7), ([0.45, 0.45, 0.1], [0.15, 0.35, 0.5])),
                ((0.25, 0.8, 0.5, 0.2), (0.5, 0.6, 0.1, 0.4), (0.8, 0.65, 0.35, 0.9)),
                (0.4, 2, 11, 1.5, 10),
                (0.65, 0.9, "agree ratio raw"),
            ),
            (
                ((0.6, 0.45), (0.35, 0.7), ([0.7, 0.2, 0.1], [0.1, 0.3, 0.6])),
                ((0.75, 0.9, 0.3, 0.5), (0.6, 0.3, 0.6, 0.7), (0.7, 0.6, 0.8, 0.2)),
                (0.9, 3, 20, 2.5, 15),
                (0.6, 0.96, "ratio raw agree"),
            ),
        )
    ),  # fmt: skip
    lines=(
        ("part1_answers", "Part 1, answer_1: q = {q1}, p = {p1}"),
        ("part1_answers", "Part 1, answer_2: q = {q2}, p = {p2}"),
        ("part1_answers", "Part 1, answer_3: p = {p3}, q = {q3}"),
        ("one_pass_answers", 'Part 3, the draft "the cat sat on", positions 1 to 4:'),
        ("one_pass_answers", "  q_i (draft)        {trace_q}"),
        ("one_pass_answers", "  p_i (target)       {trace_p}"),
        ("one_pass_answers", "  r_i (uniform draw) {trace_r}"),
        (
            "one_pass_answers",
            "Part 3, the speed: a = {a}, k = {k}; verification {t_verify_ms} ms, "
            "each draft step {t_draft_ms} ms, the target alone {t_target_ms} ms per token",
        ),
        (
            "check_understanding",
            "Check your understanding: p = {choice_p}, q = {choice_q}, token 0 drafted",
        ),
        ("check_understanding", "  {choices}"),
    ),  # fmt: skip
)

#: Lesson E7.3's variants: Part 1's example for the brute-force count (a rejection, then
#: a later token that passes its own test), a one-token draft that is rejected, and a k.
E7_3 = VariantSpace(
    assignment="e7_3_accept_step",
    rows=tuple(
        {"p": p, "q": q, "r": r, "p1": [p1], "q1": [q1], "r1": [r1], "k": k}
        for p, q, r, (p1, q1, r1), k in (
            ([0.9, 0.2, 0.8], [0.5, 0.8, 0.4], [0.1, 0.5, 0.2], (0.1, 0.9, 0.5), 4),
            ([0.6, 0.9, 0.1, 0.7], [0.3, 0.6, 0.5, 0.35], [0.4, 0.2, 0.6, 0.3], (0.2, 0.8, 0.7), 5),
            ([0.3, 0.1, 0.6], [0.6, 0.5, 0.2], [0.4, 0.3, 0.7], (0.3, 0.6, 0.9), 3),
            (
                [0.8, 0.4, 0.3, 0.9],
                [0.4, 0.5, 0.6, 0.3],
                [0.5, 0.6, 0.7, 0.95],
                (0.05, 0.5, 0.3),
                6,
            ),
            ([0.5, 0.3, 0.9], [0.25, 0.9, 0.6], [0.7, 0.6, 0.35], (0.4, 0.8, 0.6), 7),
            (
                [0.7, 0.6, 0.2, 0.5],
                [0.35, 0.3, 0.8, 0.5],
                [0.3, 0.8, 0.4, 0.6],
                (0.15, 0.6, 0.35),
                5,
            ),
            ([0.4, 0.2, 0.5, 0.6], [0.5, 0.4, 0.1, 0.8], [0.5, 0.9, 0.3, 0.6], (0.3, 0.9, 0.8), 8),
            ([0.6, 0.45, 0.3], [0.2, 0.9, 0.3], [0.55, 0.65, 0.25], (0.25, 0.5, 0.75), 3),
        )
    ),  # fmt: skip
    lines=(
        ("part1_answers", "brute_force_answer: the draft p = {p}, q = {q}, r = {r}"),
        (
            "part1_answers",
            "tokens_if_first_rejected: a one-token draft p = {p1}, q = {q1}, r = {r1}",
        ),
        ("part1_answers", "max_tokens: a draft of k = {k} tokens"),
    ),  # fmt: skip
)

#: Every lesson with a variant space, by assignment.
SPACES: dict[str, VariantSpace] = {space.assignment: space for space in (E7_1, E7_2, E7_3)}


def graded_numbers(assignment: str, key: str, student: str) -> dict[str, Any]:
    """The numbers the hidden tests grade ``student`` against.

    ``key`` and ``student`` are what the grader wrote into the test cell.  With a key and
    no student the grader did not say whose notebook this is: fail rather than guess.
    """
    if key and not student:
        raise AssertionError(
            "the grader did not say whose notebook this is, so the numbers of your own "
            "questions are unknown: grade with specdec-course, or with nbgrader autograde "
            "and the course's nbgrader_config.py"
        )
    return SPACES[assignment].numbers(key, student)


_CELL = """\
# Your numbers: the questions answered by hand use numbers of your own, chosen from your
# id. On JupyterHub your id is known; elsewhere type it in the cell above. Do not edit.
{key_name} = ""  # the course's, filled in when the lesson is released
{student_name} = ""  # filled in when your notebook is graded
import hashlib as _hashlib, os as _os, re as _re, unicodedata as _unicodedata
_ROWS = {rows}
_LINES = {lines}


def _fold(student):
    ascii_id = _unicodedata.normalize("NFKD", student).encode("ascii", "ignore").decode("ascii")
    return _re.sub(r"[^a-z0-9._-]+", "_", ascii_id.lower()).strip("._-")


def _row(student):
    if not {key_name}:
        return 0
    text = "\\n".join(({key_name}, {assignment!r}, _fold(student)))
    digest = _hashlib.sha256(text.encode("utf-8")).digest()
    return 1 + int.from_bytes(digest[:8], "big") % (len(_ROWS) - 1)


_who = ({student_name} or str(globals().get("{typed_name}", "")).strip()
        or _os.environ.get("JUPYTERHUB_USER", ""))
if {key_name} and not _who:
    raise ValueError("Type your student id between the quotes of {typed_name} in the cell "
                     "above, run it, then run this cell again: your numbers depend on it.")
{numbers_name} = dict(_ROWS[_row(_who)], variant=_row(_who))
_whose = f", for {{_who}}" if {key_name} else ""
print(f"Your numbers (variant {{{numbers_name}['variant']}}{{_whose}})")
for _line in _LINES:
    print("  " + _line.format(**{numbers_name}))
"""


def learner_cell_source(assignment: str) -> str:
    """The code of ``assignment``'s *Your numbers* cell (a read-only cell of the lesson)."""
    space = SPACES[assignment]
    return _CELL.format(
        key_name=KEY_NAME,
        student_name=STUDENT_NAME,
        typed_name=TYPED_NAME,
        numbers_name=NUMBERS_NAME,
        assignment=assignment,
        rows="[\n" + "".join(f"    {dict(row)!r},\n" for row in space.rows) + "]",
        lines="[\n" + "".join(f"    {line!r},\n" for _, line in space.lines) + "]",
    )
