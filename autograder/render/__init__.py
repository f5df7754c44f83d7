"""Rendering: the learner's feedback pages, the instructor's report, the terminal summary.

It reads results only (:mod:`autograder.grading.results`, and the grades read back
from the gradebook): never the intake, nor the record stage that calls it.

* :mod:`~autograder.render.page`: what the feedback pages and the report share: their inputs
  and the page shell;
* :mod:`~autograder.render.feedback_page`: one HTML feedback page per student, without the
  source of any hidden test;
* :mod:`~autograder.render.report_page`: the instructor's report for one assignment;
* :mod:`~autograder.render.variant_numbers`: whose numbers a student's notebook was graded
  against (the feedback page shows them by each answer, the report groups by variant);
* :mod:`~autograder.render.gradesheets`: grades as files that an LMS's own importer accepts;
* :mod:`~autograder.render.terminal`: progress while grading, and the summary table.
"""
