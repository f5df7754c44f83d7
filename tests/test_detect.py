"""The table of download layouts: its order, what ``--lms`` accepts, and its error text."""

from __future__ import annotations

import dataclasses

import pytest

from autograder.intake.detect import CHOICES, LAYOUTS, parse_download, scores
from autograder.intake.records import Context

CTX = Context(notebook="acceptance_tests", assignment="e7_2")


def test_the_layouts_are_tried_in_order_with_plain_last():
    assert [layout.name for layout in LAYOUTS] == [
        "canvas",
        "moodle",
        "blackboard",
        "gradescope",
        "github",
        "nbgrader",
        "plain",
    ]
    assert CHOICES == ("auto", *(layout.name for layout in LAYOUTS))


def test_every_layout_but_plain_is_scored():
    assert list(scores([], CTX)) == [layout.name for layout in LAYOUTS[:-1]]
    assert [layout.name for layout in LAYOUTS if layout.matches is None] == ["plain"]


def test_an_unknown_layout_is_refused_naming_the_choices():
    with pytest.raises(ValueError) as error:
        parse_download([], CTX, "webct")
    assert str(error.value) == (
        "unknown layout 'webct' (known: auto, canvas, moodle, blackboard, gradescope, "
        "github, nbgrader, plain)"
    )


def test_a_layout_cannot_be_changed():
    with pytest.raises(dataclasses.FrozenInstanceError):
        LAYOUTS[0].name = "other"  # type: ignore[misc]
