"""Rendering: the learner's feedback pages, the instructor's report, the terminal summary.

* :mod:`~autograder.render.page`: what the feedback pages and the report share: their inputs
  and the page shell;
* :mod:`~autograder.render.feedback_page`: one HTML feedback page per student, without the
  source of any hidden test;
* :mod:`~autograder.render.page_writer`: a run's feedback pages, written beside the
  recording (a second process for a batch);
* :mod:`~autograder.render.report_page`: the instructor's report for one assignment;
* :mod:`~autograder.render.variant_numbers`: whose numbers a student's notebook was graded
  against (the feedback page shows them by each answer, the report groups by variant);
* :mod:`~autograder.render.gradesheets`: grades as files that an LMS's own importer accepts;
* :mod:`~autograder.render.terminal`: progress while grading, and the summary table.
"""
