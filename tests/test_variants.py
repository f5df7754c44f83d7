"""Each learner's own numbers: the derivation, the fairness of every variant, and whose
numbers grade a notebook.

The in-process tests run the lesson's *Your numbers* cell, its solution cells for the
questions answered by hand and their hidden tests in one namespace, after the grader's
own preprocessors (``Variants``, ``GradedVariants``) wrote the key and the graded id into
the notebook, as they do at release and at autograde: no kernel, so every variant of the
table and 200 ids cost a second.  One test grades real notebooks, with a key, through
``specdec-course grade`` and plain ``nbgrader autograde``.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from markupsafe import escape
from support.course import FILES, REPO, new_course, write_nb
from support.lessons import learner_cell
from support.variants import e7_1_hand_worked, e7_2_hand_worked, e7_3_hand_worked

from autograder.preprocessors import GradedVariants, Variants
from specdec_reference import variants
from specdec_reference.acceptance import accept_prob, overall_acceptance
from specdec_reference.analysis import expected_tokens
from specdec_reference.testing import e7_2
from specdec_reference.testing.e7_2.speed import part3_numbers

ASSIGNMENT = "e7_2_acceptance_tests"
SPACE = variants.SPACES[ASSIGNMENT]
SOURCE = nbformat.read(REPO / "source" / ASSIGNMENT / "acceptance_tests.ipynb", as_version=4)
#: The solution cells answered by hand, and the test cells that grade them.
BY_HAND = ("part1_answers", "one_pass_answers", "check_understanding")
BY_HAND_TESTS = tuple(
    c.metadata["nbgrader"]["grade_id"]
    for c in SOURCE.cells
    if c.metadata.get("nbgrader", {}).get("grade")
    and c.metadata["nbgrader"]["grade_id"].startswith(tuple(f"test_{s}_" for s in BY_HAND))
)
KEY = "spring-term"
IDS = [f"s{n:04d}" for n in range(200)]
STUB = "raise NotImplementedError()"
#: Ungraded cells the questions answered by hand read (E7.1's model and hardware dicts).
SUPPORT = ("code-specs",)


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def released(nb=SOURCE, key: str = KEY):
    """``nb``'s cells of the questions answered by hand (the id and *Your numbers* cells,
    the answers and their tests), after the release's ``Variants`` preprocessor, with ``key``."""
    nb = copy.deepcopy(nb)
    nb.cells = [
        c
        for c in nb.cells
        if c.get("id") in ("your_id", "your_numbers", *SUPPORT)
        or _meta(c)
        .get("grade_id", "")
        .startswith(("part1_", "test_part1_", "one_pass", "test_one_pass", "check_", "test_check_"))
    ]
    out, _ = Variants(key=key).preprocess(nb, {"nbgrader": {"student": "."}})
    return out


def graded(nb, student: str):
    """``nb`` after autograde's ``GradedVariants``: ``student`` as the intake recorded it."""
    out, _ = GradedVariants(student_id=student).preprocess(copy.deepcopy(nb), {"nbgrader": {}})
    return out


def run_by_hand(
    nb,
    bodies: dict[str, str] | None = None,
    typed: str = "",
    by_hand: tuple[str, ...] = BY_HAND,
    tests: tuple[str, ...] = BY_HAND_TESTS,
) -> dict[str, str]:
    """Run ``nb``'s id cell (with ``typed``), its *Your numbers* cell, its ``SUPPORT`` cells,
    the solution cells answered by hand (``by_hand``; ``bodies`` replace their solutions)
    and their ``tests``, in one namespace; return ``{test cell: failure message}`` (""
    when it passed)."""
    ns: dict = {"__name__": "__main__", "_ih": [""], "_specdec_preloaded": False}
    shell = type("Shell", (), {"events": type("E", (), {"register": lambda *a: None})()})()
    ns["get_ipython"] = lambda: shell
    outcomes = {}
    for cell in nb.cells:
        meta = _meta(cell)
        if cell.get("id") == "your_id":
            source = f"MY_STUDENT_ID = {typed!r}"
        elif cell.get("id") in ("your_numbers", *SUPPORT):
            source = cell.source
        elif meta.get("grade_id") in by_hand:
            source = cell.source
            if bodies is not None:
                source = learner_cell(source, bodies[meta["grade_id"]])
        elif meta.get("grade_id") in tests:
            source = cell.source
        else:
            continue
        ns["_ih"].append(source)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, f"<cell {cell.get('id')}>", "exec"), ns)
            message = ""
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}" or "failed"
        if meta.get("grade_id") in tests:
            outcomes[meta["grade_id"]] = message
    return outcomes


#: What answering with a classmate's numbers always costs in E7.2 (rows 1 and 2 of its table).
CLASSMATE_LOSES = {
    "test_part1_answers_answer_1",
    "test_part1_answers_answer_3",
    "test_one_pass_answers_accepted_tokens",
    "test_one_pass_answers_answer_e_n",
    "test_check_understanding_choice",
}


def row_of(student: str) -> dict:
    return SPACE.numbers(KEY, student)


def test_the_notebooks_cell_is_the_modules_derivation():
    """The *Your numbers* cell is :func:`variants.learner_cell_source`, read-only, and
    learners see its output, not its code."""
    [cell] = [c for c in SOURCE.cells if c.get("id") == "your_numbers"]
    assert cell.source == variants.learner_cell_source(ASSIGNMENT).rstrip("\n")
    assert _meta(cell)["locked"] and not _meta(cell)["solution"] and not _meta(cell)["grade"]
    assert cell.metadata["jupyter"]["source_hidden"]


def test_the_cell_and_the_grader_derive_the_same_row_for_every_id():
    """200 ids: the notebook's cell (the key written by the release) picks the row that
    :func:`variants.graded_numbers` grades, every row of the table is someone's, and a
    new key deals the rows again."""
    nb = released()
    seen = set()
    for student in IDS:
        want = variants.graded_numbers(ASSIGNMENT, KEY, student)
        assert cell_numbers(nb, student) == want, student
        seen.add(want["variant"])
    assert seen == set(range(1, len(SPACE.rows)))  # row 0 only without a key
    moved = sum(SPACE.index(KEY, s) != SPACE.index(KEY + "-next", s) for s in IDS)
    assert moved > len(IDS) // 2  # about 7 in 8 move
    # The id is folded as the intake folds it: case, accents and spaces do not matter.
    assert SPACE.index(KEY, " Zoë Müller ") == SPACE.index(KEY, "zoe_muller")
    # The derivation as documented: SHA-256 of key, assignment and folded id, one per line,
    # its first 8 bytes as a big-endian number, modulo the table's size.
    digest = hashlib.sha256(f"k\n{ASSIGNMENT}\nalice".encode()).digest()
    assert (
        variants.variant_index("k", ASSIGNMENT, " Alice", 8)
        == 1 + int.from_bytes(digest[:8], "big") % 7
    )


def learners_and_classmates(nb, assignment: str) -> list[tuple[str, dict, str, dict]]:
    """``(student, their numbers, a classmate, the classmate's numbers)`` for each of the
    200 ids, the classmate the next id; first checks that the release's *Your numbers*
    cell and the grader derive the same row for every id, and that every keyed row of
    ``assignment``'s table is someone's."""
    space = variants.SPACES[assignment]
    numbers = {student: space.numbers(KEY, student) for student in IDS}
    for student, mine in numbers.items():
        graded_row = variants.graded_numbers(assignment, KEY, student)
        assert cell_numbers(nb, student) == mine == graded_row, student
    assert {mine["variant"] for mine in numbers.values()} == set(range(1, len(space.rows)))
    classmates = IDS[1:] + IDS[:1]
    return [(s, numbers[s], c, numbers[c]) for s, c in zip(IDS, classmates, strict=True)]


def cell_numbers(nb, student: str) -> dict:
    """What the release's *Your numbers* cell gives ``student`` (its printout swallowed)."""
    cell = next(c for c in nb.cells if c.get("id") == "your_numbers").source
    ns = {"MY_STUDENT_ID": student}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(cell, ns)
    return ns["MY_NUMBERS"]


def test_without_a_key_everyone_gets_the_printed_numbers():
    nb = released(key="")
    for student in IDS[:20] + [""]:
        assert cell_numbers(nb, student) == {"variant": 0, **SPACE.rows[0]}


def test_the_cell_takes_the_hub_id_the_typed_id_or_asks_for_one(monkeypatch):
    nb = released()
    cell = nb.cells[[c.get("id") for c in nb.cells].index("your_numbers")].source

    def row(typed: str, source: str = cell) -> tuple[int, str]:
        ns = {"MY_STUDENT_ID": typed}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(source, ns)
        return ns["MY_NUMBERS"]["variant"], out.getvalue()

    monkeypatch.setenv("JUPYTERHUB_USER", "hubuser")
    assert row("")[0] == SPACE.index(KEY, "hubuser")
    variant, shown = row("")
    assert f"variant {variant}, for hubuser" in shown and "Part 1, answer_1: q = " in shown
    assert row("typed")[0] == SPACE.index(KEY, "typed")  # what the learner typed wins
    graded_cell = graded(nb, "intake-id")
    graded_source = graded_cell.cells[[c.get("id") for c in nb.cells].index("your_numbers")].source
    assert row("typed", graded_source)[0] == SPACE.index(KEY, "intake-id")  # grading: the intake's
    monkeypatch.delenv("JUPYTERHUB_USER")
    with pytest.raises(
        ValueError, match="Type your student id between the quotes of MY_STUDENT_ID"
    ):
        row("")


def test_every_variant_keeps_the_lessons_teaching_points():
    """Each row: answer_1's token over-confident, answer_2's not; every graded mistake
    gives a value apart from the right one; the trace accepts an over-confident token,
    rejects one, and discards a later token whose ratio is at least 1; no draw sits on its
    threshold; the speed-up is above 1; the understanding options are three apart."""
    for i, r in enumerate(SPACE.rows):
        assert r["p1"] < r["q1"] and r["p2"] > r["q2"], i
        a1 = r["p1"] / r["q1"]
        for wrong in (r["p1"], r["q1"] / r["p1"], r["q1"], 1.0):
            assert abs(a1 - wrong) > 0.01, (i, wrong)
        for wrong in (r["p2"] / r["q2"], r["p2"], r["q2"] / r["p2"]):
            assert abs(1 - wrong) > 0.01, (i, wrong)
        p, q = r["p3"], r["q3"]
        assert abs(sum(p) - 1) < 1e-9 and abs(sum(q) - 1) < 1e-9, i
        a3 = overall_acceptance(p, q)
        for wrong in (sum(map(max, p, q)), sum(x * y for x, y in zip(p, q, strict=True)), 1 - a3):
            assert abs(a3 - wrong) > 0.01, (i, wrong)
        rule = e7_2.verification._rule(r)
        kept = e7_2.trace(rule, r["trace_r"])
        assert len(kept) < 4 and any(rule[j] < 1 for j in kept), i
        assert any(rule[j] >= 1 for j in range(len(kept) + 1, 4)), i
        assert min(abs(t - u) for t, u in zip(rule, r["trace_r"], strict=True)) >= 0.05, i
        for wrong in (
            e7_2.trace(rule, r["trace_r"], stop=False),
            e7_2.trace(r["trace_p"], r["trace_r"]),
            e7_2.trace(e7_2.verification._inverted(r), r["trace_r"]),
            [0, 1, 2, 3],
        ):
            assert wrong != kept, (i, wrong)
        c = part3_numbers(r)
        e_n = expected_tokens(c["a"], c["k"])
        speed = e_n / (c["t_verify"] + c["k"] * c["t_draft"])
        assert speed * c["t_target"] > 1, i
        for wrong in (e_n - 1, c["k"] + 1, 1 / (1 - c["a"]), e_n + c["a"] ** (c["k"] + 1)):
            assert abs(wrong - e_n) > 2e-3 * e_n, (i, wrong)
        for wrong in (
            e_n / c["t_verify"],
            e_n / (c["t_verify"] + c["t_draft"]),
            e_n / c["t_target"],
        ):
            assert abs(wrong - speed) > 2e-3 * speed, (i, wrong)
        up, uq = r["choice_p"][0], r["choice_q"][0]
        assert 0.5 < up < uq and sorted(r["options"].split()) == ["agree", "ratio", "raw"], i
        assert min(abs(up / uq - 1), abs(up / uq - up)) > 0.02, i


def test_the_source_scores_full_marks_and_the_blank_zero_for_200_learners():
    """For 200 ids (every row of the table among them), graded with the id the grader
    writes: the source's solutions pass every test of the questions answered by hand,
    the release's stubs fail every one."""
    nb = released()
    rows = set()
    for student in IDS:
        mine = graded(nb, student)
        assert not any(run_by_hand(mine).values()), student
        blank = run_by_hand(mine, dict.fromkeys(BY_HAND, STUB))
        assert all(blank.values()), (student, blank)
        rows.add(row_of(student)["variant"])
    assert rows == set(range(1, len(SPACE.rows)))


def test_every_variants_hand_worked_answers_pass_and_a_classmates_fail():
    """A learner who works their own row's numbers by hand passes; one who copies a
    classmate's numbers (typing the classmate's id shows them) is graded against their
    own and loses every answer that differs, whatever the notebook sets."""
    nb = released()
    by_row = {}
    for student in IDS:
        by_row.setdefault(row_of(student)["variant"], student)
    for variant, student in sorted(by_row.items()):
        mine = graded(nb, student)
        assert not any(run_by_hand(mine, e7_2_hand_worked(row_of(student))).values()), variant
    alice, bob = by_row[1], by_row[2]  # rows whose answers differ but for answer_2
    copied = e7_2_hand_worked(row_of(bob))
    # Alice types Bob's id: her cell shows Bob's numbers...
    assert cell_numbers(nb, bob) == row_of(bob)
    # ...and, to be sure, she also claims Bob's id every way a notebook can.
    forged = copy.deepcopy(copied)
    forged["part1_answers"] += (
        f"\nimport os\nos.environ['JUPYTERHUB_USER'] = {bob!r}\nGRADED_STUDENT_ID = {bob!r}\n"
        f"_GRADED_STUDENT_ID = {bob!r}\nCOURSE_VARIANT_KEY = ''\n_COURSE_VARIANT_KEY = ''"
    )
    outcome = run_by_hand(graded(nb, alice), forged, typed=bob)
    lost = {g for g, m in outcome.items() if m}
    # The answers Bob's numbers change all fail; answer_2 is 1 in every row (the cap is the
    # lesson's point), and stop_position and tokens_emitted count when they follow from the
    # learner's own trace, so one wrong number costs once.
    assert CLASSMATE_LOSES <= lost and "test_part1_answers_answer_2" not in lost, outcome
    mine, theirs = row_of(alice), row_of(bob)
    got, want = accept_prob(theirs["p1"], theirs["q1"]), accept_prob(mine["p1"], mine["q1"])
    assert outcome["test_part1_answers_answer_1"].startswith(
        f"AssertionError: answer_1 (q = {mine['q1']}, p = {mine['p1']}) is {got!r}, "
        f"expected {want:g}."
    )
    # Graded as Bob, the same answers pass: the check is the id, not the answers' form.
    assert not any(run_by_hand(graded(nb, bob), copied).values())


def test_the_grader_fills_only_locked_cells_and_only_the_id_at_autograde():
    nb = released()
    learner = nbformat.v4.new_code_cell('GRADED_STUDENT_ID = ""\nCOURSE_VARIANT_KEY = ""')
    nb.cells.insert(0, learner)
    out = graded(nb, 'o"brien')
    assert out.cells[0].source == learner.source  # a learner's cell is never filled
    test_cell = next(c for c in out.cells if _meta(c).get("grade_id") == BY_HAND_TESTS[0])
    assert '_GRADED_STUDENT_ID = "o\\"brien"' in test_cell.source
    assert f'_COURSE_VARIANT_KEY = "{KEY}"' in test_cell.source  # from the release, kept
    # A release made without a key stays without one at autograde.
    unkeyed = graded(released(key=""), "alice")
    cell = next(c for c in unkeyed.cells if c.get("id") == "your_numbers")
    assert 'COURSE_VARIANT_KEY = ""' in cell.source and 'GRADED_STUDENT_ID = "alice"' in cell.source


def test_a_key_without_an_id_fails_the_test_rather_than_guess():
    with pytest.raises(AssertionError, match="did not say whose notebook this is"):
        variants.graded_numbers(ASSIGNMENT, KEY, "")


E7_3 = "e7_3_accept_step"
E7_3_SOURCE = nbformat.read(REPO / "source" / E7_3 / "accept_step.ipynb", as_version=4)
E7_3_TESTS = (
    "test_part1_answers_brute_force",
    "test_part1_answers_first_rejected",
    "test_part1_answers_max_tokens",
)


def test_e7_3s_cell_is_the_modules_and_every_row_keeps_the_point():
    """E7.3's cell is the module's; in every row the brute-force count differs from the
    accepted prefix and from the draft's length (a token after the first rejection passes
    its own test), the one-token draft is rejected, and no draw sits on its threshold."""
    from specdec_reference.testing.e7_3 import brute_force_count, prefix

    [cell] = [c for c in E7_3_SOURCE.cells if c.get("id") == "your_numbers"]
    assert cell.source == variants.learner_cell_source(E7_3).rstrip("\n")
    assert variants.SPACES[E7_3].rows[0]["p"] == [0.9, 0.2, 0.8]  # the lesson's first example
    for i, r in enumerate(variants.SPACES[E7_3].rows):
        kept = prefix(r["p"], r["q"], r["r"], lambda p, q, u: u <= min(1, p / q))
        assert kept < brute_force_count(r) < len(r["p"]), i
        assert not r["r1"][0] <= min(1, r["p1"][0] / r["q1"][0]), i
        draws = zip(r["p"] + r["p1"], r["q"] + r["q1"], r["r"] + r["r1"], strict=True)
        assert min(abs(u - min(1, p / q)) for p, q, u in draws) >= 0.049, i
        assert r["k"] >= 3, i


def test_e7_3_grades_200_learners_against_their_own_numbers():
    """For 200 ids: E7.3's cell derives the row the grader grades; the source scores full
    marks and the blank release zero on Part 1; answers worked by hand from one's own
    numbers pass, and from a classmate's lose each answer that differs."""
    nb = released(E7_3_SOURCE)
    for student, mine, classmate, theirs in learners_and_classmates(nb, E7_3):
        graded_nb = graded(nb, student)
        run = functools.partial(
            run_by_hand, graded_nb, by_hand=("part1_answers",), tests=E7_3_TESTS
        )

        assert not any(run().values()), student
        assert all(run({"part1_answers": STUB}).values()), student
        assert not any(run(e7_3_hand_worked(mine)).values()), student
        lost = {g for g, m in run(e7_3_hand_worked(theirs), typed=classmate).items() if m}
        differ = {
            "test_part1_answers_brute_force": e7_3_hand_worked(theirs)["part1_answers"].split()[2]
            != e7_3_hand_worked(mine)["part1_answers"].split()[2],
            "test_part1_answers_max_tokens": theirs["k"] != mine["k"],
        }
        assert lost == {g for g, d in differ.items() if d}, (student, classmate)


E7_1 = "e7_1_why_decoding_is_slow"
E7_1_SOURCE = nbformat.read(REPO / "source" / E7_1 / "why_decoding_is_slow.ipynb", as_version=4)
E7_1_BY_HAND = ("part1_answers", "check_understanding")
E7_1_TESTS = (
    "test_part1_answers_ms_per_token",
    "test_part1_answers_intensity",
    "test_part1_answers_verify_ms",
    "test_check_understanding_choice",
)


def test_e7_1s_cell_is_the_modules_and_every_row_keeps_the_point():
    """E7.1's cell is the module's and row 0 the lesson's printed numbers.  In every row:
    the step and the pass over k + 1 positions are memory-bound (verification costs one
    step), every mistake the hidden tests name gives a value apart from the right one, the
    closing question's batch fits on its card, its answer differs from the weights' ridge
    and the ridge batch less one, and its crossing is no tie; no keyed row asks for a time
    the page prints (Llama-2-7B on the A100, Llama-2-70B on the H100)."""
    from specdec_reference import roofline, specs
    from specdec_reference.testing.e7_1 import by_hand

    [cell] = [c for c in E7_1_SOURCE.cells if c.get("id") == "your_numbers"]
    assert cell.source == variants.learner_cell_source(E7_1).rstrip("\n")
    space = variants.SPACES[E7_1]
    row0 = space.rows[0]
    assert (row0["model"], row0["hardware"], row0["k"]) == ("Llama-2-7B", "A100 SXM 80 GB", 4)
    assert (row0["cu_hardware"], row0["sequences"], row0["seq_len"]) == ("A100 SXM 80 GB", 60, 2048)
    assert row0["offers"] == {"A": 2, "B": 14, "C": 153, "D": None}  # the lesson's options
    printed = {("Llama-2-7B", "A100 SXM 80 GB"), ("Llama-2-70B", "H100 SXM")}
    for i, r in enumerate(space.rows):
        model, card = by_hand.part1_pair(r)
        if i:
            assert (r["model"], r["hardware"]) not in printed, i
        assert r["k"] >= 2 and r["k"] + 1 < roofline.ridge_batch(model, card), i
        want = by_hand.part1_answers(r)
        assert want["answer_verify_ms"] == want["answer_ms_per_token"], i
        one = want["answer_ms_per_token"]
        compute = 2 * model["params"] / card["peak_flops"] * 1e3
        for wrong in (8 * one, compute, one / 1e3, (r["k"] + 1) * one, r["k"] * one,
                      one + (r["k"] + 1) * compute, (r["k"] + 1) * compute):  # fmt: skip
            assert abs(wrong - one) > by_hand.MS_TOLERANCE + 0.05, (i, wrong)
        ridge = card["peak_flops"] / card["bandwidth"]
        for wrong in (0.5, 0.125, 2.0, ridge):
            assert abs(wrong - want["answer_intensity"]) > 0.2, (i, wrong)
        cu_card = next(h for h in specs.HARDWARE if h["name"] == r["cu_hardware"])
        assert r["sequences"] <= roofline.max_batch(specs.LLAMA2_7B, cu_card, r["seq_len"]), i
        kinds = by_hand.choice_kinds(r)
        assert sorted(kinds.values()) == ["none", "ridge", "right", "weights"], i
        offer = {kind: r["offers"][letter] for letter, kind in kinds.items()}
        assert offer["right"] >= 2 and len({offer["right"], offer["weights"], offer["ridge"]}) == 3
        reads = (
            roofline.weight_bytes(specs.LLAMA2_7B["params"], 2)
            + roofline.model_cache_bytes(specs.LLAMA2_7B, r["seq_len"], r["sequences"])
        ) / cu_card["bandwidth"]
        per_position = roofline.flops_per_token(specs.LLAMA2_7B["params"]) / cu_card["peak_flops"]
        crossing = reads / (r["sequences"] * per_position)  # k + 1 at which the times tie
        assert offer["right"] + 1 == int(crossing) + 1 and crossing % 1 > 0.05, i
    assert len({r["options"].split().index("right") for r in space.rows}) == 4  # every letter


def test_e7_1_grades_200_learners_against_their_own_numbers():
    """For 200 ids: E7.1's cell derives the row the grader grades; the source scores full
    marks and the blank release zero on Part 1 and the closing question; answers worked by
    hand from one's own numbers pass, and from a classmate's lose each answer that differs."""
    from specdec_reference.testing.e7_1 import part1_answers

    nb = released(E7_1_SOURCE)
    for student, mine, classmate, theirs in learners_and_classmates(nb, E7_1):
        run = functools.partial(
            run_by_hand, graded(nb, student), by_hand=E7_1_BY_HAND, tests=E7_1_TESTS
        )
        assert not any(run().values()), student
        assert all(run(dict.fromkeys(E7_1_BY_HAND, STUB)).values()), student
        own = e7_1_hand_worked(mine)
        assert not any(run(own).values()), student
        copied = e7_1_hand_worked(theirs)
        lost = {g for g, m in run(copied, typed=classmate).items() if m}
        a, b = part1_answers(mine), part1_answers(theirs)
        differ = {
            "test_part1_answers_ms_per_token": abs(
                a["answer_ms_per_token"] - b["answer_ms_per_token"]
            )
            > 0.1,
            "test_part1_answers_verify_ms": abs(a["answer_verify_ms"] - b["answer_verify_ms"])
            > 0.1,
            "test_check_understanding_choice": own["check_understanding"]
            != copied["check_understanding"],
        }
        assert lost == {g for g, d in differ.items() if d}, (student, classmate)


def test_e7_1s_feedback_and_report_show_the_learners_numbers():
    """The pages read E7.1's key from its release: the feedback lists each learner's
    numbers beside Part 1 and the closing question, the report's results by variant
    count the tests of those answers."""
    from autograder.render.variant_numbers import numbered_tests, release_variants

    release = nbformat.read(REPO / "release" / E7_1 / "why_decoding_is_slow.ipynb", as_version=4)
    keyed, _ = Variants(key=KEY).preprocess(copy.deepcopy(release), {"nbgrader": {}})
    found = release_variants(E7_1, [keyed])
    assert found is not None and found.key == KEY
    assert numbered_tests(found, [keyed]) == list(E7_1_TESTS)
    student = IDS[0]
    mine = variants.SPACES[E7_1].numbers(KEY, student)
    assert found.of(student) == mine["variant"]
    assert found.numbers(student, "part1_answers") == [
        f"Part 1: {mine['model']} in 16-bit on the {mine['hardware']}; the draft has "
        f"k = {mine['k']} tokens"
    ]
    assert found.numbers(student, "check_understanding")[1:] == [
        f"  {letter}: {mine[f'choice_{letter}']}" for letter in "ABCD"
    ]
    assert found.numbers(student, "step_time") == []


def _pick(key: str, rows: tuple[int, ...], prefix: str) -> str:
    """An id whose row under ``key`` is one of ``rows``."""
    return next(s for n in range(10_000) if SPACE.index(key, s := f"{prefix}{n}") in rows)


@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_keyed_course_grades_each_learner_against_their_own_numbers(tmp_path):
    """A course with a key, released, then graded twice, by ``specdec-course grade`` and by
    plain ``nbgrader autograde``: Alice works her own numbers, Carol types Dave's id, works
    Dave's numbers and claims his id in her own code; both graders give Alice every
    hand-worked point and take Carol's differing answers, cell for cell the same."""
    from autograder.grade import grade
    from autograder.release import release

    sys.path.insert(0, str(FILES))
    from sample_builder import fill, reference_bodies

    course = new_course(tmp_path / "course", {ASSIGNMENT: REPO / "source" / ASSIGNMENT})
    config = course / "nbgrader_config.py"
    config.write_text(
        config.read_text().replace('c.Variants.key = ""', 'c.Variants.key = "term-7"')
    )
    release(ASSIGNMENT, course=course, check=False)
    nb = nbformat.read(course / "release" / ASSIGNMENT / "acceptance_tests.ipynb", as_version=4)
    [numbers_cell] = [c for c in nb.cells if c.get("id") == "your_numbers"]
    assert 'COURSE_VARIANT_KEY = "term-7"' in numbers_cell.source
    assert 'GRADED_STUDENT_ID = ""' in numbers_cell.source

    key_space = variants.SPACES[ASSIGNMENT]
    alice, carol, dave = (
        _pick("term-7", (1,), "alice"),
        _pick("term-7", (1,), "carol"),
        _pick("term-7", (2,), "dave"),
    )
    bodies = reference_bodies(SOURCE)

    def notebook(answers: dict[str, str], typed: str = ""):
        out = copy.deepcopy(nb)
        for cell in out.cells:
            gid = _meta(cell).get("grade_id")
            if gid and _meta(cell).get("solution") and cell.cell_type == "code":
                cell.source = fill(cell.source, answers.get(gid, bodies[gid]), gid)
            if cell.get("id") == "your_id":
                cell.source = f"MY_STUDENT_ID = {typed!r}"
        return out

    own = e7_2_hand_worked(key_space.numbers("term-7", alice))
    copied = e7_2_hand_worked(key_space.numbers("term-7", dave))
    copied["part1_answers"] += (
        f"\nimport os\nos.environ['JUPYTERHUB_USER'] = {dave!r}\nGRADED_STUDENT_ID = {dave!r}\n"
        f"_GRADED_STUDENT_ID = {dave!r}"
    )
    subs = {alice: notebook(own), carol: notebook(copied, typed=dave)}
    for student, sub in subs.items():
        write_nb(tmp_path / "subs" / f"{student}.ipynb", sub)

    plain = Path(shutil.copytree(course, tmp_path / "plain"))
    result = grade(ASSIGNMENT, submissions=tmp_path / "subs", course=course, workers=2)
    ours = {
        s: {c.grade_id: c.score for c in r.cells if c.grade_id in BY_HAND_TESTS}
        for s, r in result.results.items()
    }
    # The Your numbers cell (it reads the environment and hashes) raises no integrity flag.
    assert not result.results[alice].flags and not any(c.flags for c in result.results[alice].cells)
    for student, sub in subs.items():
        write_nb(plain / "submitted" / student / ASSIGNMENT / "acceptance_tests.ipynb", sub)
    nbgrader = [str(Path(sys.executable).with_name("nbgrader")), "autograde", ASSIGNMENT]
    proc = subprocess.run(
        nbgrader, cwd=plain, capture_output=True, text=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "JUPYTERHUB_USER"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{plain / 'gradebook.db'}") as gb:
        theirs = {
            s: {
                g.name: g.score
                for g in gb.find_submission_notebook("acceptance_tests", ASSIGNMENT, s).grades
                if g.name in BY_HAND_TESTS
            }
            for s in subs
        }
    points = {g: c.metadata["nbgrader"]["points"] for g in BY_HAND_TESTS for c in SOURCE.cells
              if _meta(c).get("grade_id") == g}  # fmt: skip
    assert ours[alice] == theirs[alice] == points
    # Carol loses what the in-process evaluation says she loses (with the key the release
    # carries, graded as Carol): at least what a classmate's numbers always cost.
    in_process = run_by_hand(graded(released(key="term-7"), carol), copied, typed=dave)
    lost = {g for g, m in in_process.items() if m}
    assert CLASSMATE_LOSES <= lost
    assert ours[carol] == theirs[carol] == {g: 0 if g in lost else p for g, p in points.items()}
    # The feedback pages show each learner's own numbers beside the answers; the report
    # groups the class by variant.
    from autograder.render.report_page import write_report

    for student in subs:
        page = (course / "feedback" / student / ASSIGNMENT / "acceptance_tests.html").read_text()
        for line in key_space.describe(key_space.numbers("term-7", student)):
            assert str(escape(line.strip())) in page, (student, line)
    report = write_report(course, ASSIGNMENT).read_text()
    assert "Results by variant" in report
    assert '<th scope="col" class="num">1</th>' in report  # both have row 1 of the table
    assert '<tr><th scope="row">Students</th><td class="num">2</td></tr>' in report
    by_variant = report[report.index('id="variants"') :]
    answer_1 = by_variant[by_variant.index("<code>test_part1_answers_answer_1</code>") :]
    assert answer_1.split("</tr>")[0].strip().endswith('50% <span class="muted">(1/2)</span></td>')
    # Every function cell scores full marks for both: only the numbers differ.  The written
    # answer (left as released) waits for a grader's hand and scores nothing yet.
    written = sum(_meta(c)["points"] for c in SOURCE.cells
                  if c.cell_type == "markdown" and _meta(c).get("grade"))  # fmt: skip
    scores = {s: (r.score, r.max_score) for s, r in result.results.items()}
    assert all(score == most - written - sum(points[g] for g in lost) * (s == carol)
               for s, (score, most) in scores.items()), scores  # fmt: skip
