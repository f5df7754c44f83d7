"""What the command line and the verbs share: ``grade``'s defaults.

It imports nothing, so that parsing the arguments (:mod:`autograder.cli`) offers the
verbs' own defaults without importing a verb.  The choices of ``--lms`` and
``export --to`` are the LMS registry's (:mod:`autograder.intake.detect`).
"""

#: ``grade --lms``: recognise the download's layout from its names.
LMS = "auto"
#: ``grade --notebook-timeout``: seconds per notebook.
NOTEBOOK_TIMEOUT = 300.0
#: ``grade --gradebook-wait``: seconds to wait for a gradebook another program keeps locked.
GRADEBOOK_WAIT = 120.0
