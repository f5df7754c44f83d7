"""nbgrader configuration for the chapter E7 course (speculative decoding).

Plain nbgrader commands (``nbgrader generate_assignment``, ``nbgrader autograde``)
work on this course as they are; ``specdec-course`` reads the same file.
"""

from nbgrader.converters import Autograde, GenerateAssignment

c = get_config()  # noqa: F821  (injected by traitlets when nbgrader loads this file)

c.CourseDirectory.course_id = "specdec-e7"

# Learners get stubs that fail loudly until they write code.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# A learner who deletes a test cell gets it back (worth zero points only if it fails).
c.OverwriteCells.add_missing_cells = True

# Only notebooks are course material: a learner's numpy.py, or a helper module left
# next to a notebook, must neither leak into release/ nor shadow a library at grading.
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "feedback",
    "*.py",
]

# Per-cell wall-clock limit (seconds) while autograding; a cell that runs longer is
# interrupted and scores zero.  `specdec-course grade --timeout` overrides it.
c.Execute.timeout = 30
c.Execute.interrupt_on_timeout = True

# nbgrader scores a test cell zero when anything reaches stderr.  Python warnings
# (numpy's RuntimeWarning on 0/0, say) are not failures, so the kernel prints them
# on stdout instead; learners still see them.
c.Execute.extra_arguments = [
    "--HistoryManager.hist_file=:memory:",
    # ipykernel logs a warning about unencrypted TCP at start-up; it can surface as stderr
    # output of a cell, which plain nbgrader scores as a failure.
    "--IPKernelApp.log_level=ERROR",
    "--IPKernelApp.exec_lines="
    "import sys as _s, warnings as _w; "
    "_w.showwarning = lambda m, c, f, n, file=None, line=None, _s=_s, _w=_w: "
    "_s.stdout.write(_w.formatwarning(m, c, f, n, line)); "
    "del _s, _w",
]

# Keep autograded notebooks (and so feedback) small even when a submission floods output.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 50

# Each learner's own numbers for the questions answered by hand: a hash of this key, the
# assignment and the learner's id picks them. Empty: everyone gets the lesson's printed
# numbers. Set it before releasing; a new key (each term, say) needs a new release.
c.Variants.key = ""
# The release gets the key, and the hidden tests the id of the student graded (the folder
# nbgrader grades, submitted/<id>/). specdec-course builds its own pipeline; these lines
# are for plain nbgrader.
c.GenerateAssignment.preprocessors = [
    "autograder.preprocessors.variants.Variants",
    *GenerateAssignment.class_traits()["preprocessors"].default(),
]
c.Autograde.autograde_preprocessors = [
    "autograder.preprocessors.variants.GradedVariants",
    *Autograde.class_traits()["autograde_preprocessors"].default(),
]
