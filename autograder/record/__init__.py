"""Recording: what a run learned, into the course, where nbgrader and the learner read it.

* :mod:`~autograder.record.recorder`: the record step of a ``grade`` run: each result
  staged as it arrives, committed a batch at a time, then its feedback page; the
  download's notebooks into ``submitted/``;
* :mod:`~autograder.record.store`: one result into the course (autograded notebook,
  results JSON, gradebook rows), the results read back, ``grades.csv`` and ``cells.csv``;
* :mod:`~autograder.record.gradebook_rows`: one result's rows in nbgrader's gradebook;
* :mod:`~autograder.record.submitted`: filling nbgrader's ``submitted/`` folder without
  harming what is there, and the exchange files beside the feedback;
* :mod:`~autograder.record.page_writer`: a run's feedback pages, written beside the
  recording (a second process for a batch).

It writes; what it writes is rendered by :mod:`autograder.render`, which reads results
only.
"""
