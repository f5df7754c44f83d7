"""What the command line and the verbs share: the export formats and ``grade``'s defaults.

It imports nothing, so that parsing the arguments (:mod:`autograder.cli`) offers the
verbs' own choices and defaults without importing a verb.
"""

#: ``export --to``: the LMSs whose import file ``export`` writes, and plain CSV.
EXPORT_FORMATS = ("canvas", "moodle", "blackboard", "csv")
#: ``grade --lms``: recognise the download's layout from its names.
LMS = "auto"
#: ``grade --notebook-timeout``: seconds per notebook.
NOTEBOOK_TIMEOUT = 300.0
#: ``grade --gradebook-wait``: seconds to wait for a gradebook another program keeps locked.
GRADEBOOK_WAIT = 120.0
