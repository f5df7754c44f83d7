"""Intake: turn what the instructor hands over (a folder, an LMS zip) into submissions.

* :mod:`~autograder.intake.collect`: collect a class's submissions from a folder or an LMS
  download: one :class:`~autograder.intake.collect.Submission` per student;
* :mod:`~autograder.intake.reading`: read a folder or a zip safely, one admission policy
  for both;
* :mod:`~autograder.intake.spool`: where the collected notebooks wait to be graded, on disk
  rather than in memory;
* :mod:`~autograder.intake.detect`: recognise a download's layout (``--lms auto``) and pick
  its parser;
* :mod:`~autograder.intake.records`: what a download says about each student, as every
  parser returns it;
* :mod:`~autograder.intake.lms`: what each LMS module declares (its layout, its roster's
  columns, whether ``export`` writes its import file), which the registries read;
* :mod:`~autograder.intake.plain`: plain folders and zips, the student id from the file or
  folder name;
* :mod:`~autograder.intake.canvas`: Canvas "Download Submissions" zips;
* :mod:`~autograder.intake.blackboard`: Blackboard "Download Assignment", the newest attempt
  per username;
* :mod:`~autograder.intake.moodle`: Moodle "Download all submissions";
* :mod:`~autograder.intake.gradescope`: Gradescope "Export Submissions";
* :mod:`~autograder.intake.github`: GitHub Classroom, one repository per student;
* :mod:`~autograder.intake.exchange`: nbgrader's own ``submitted/`` folder, as ``nbgrader
  collect`` leaves it;
* :mod:`~autograder.intake.roster`: a class roster CSV from the LMS, applied to a parsed
  download;
* :mod:`~autograder.intake.validate`: whether a submitted file is a notebook nbgrader can
  read (asked by the worker that grades it).
"""
