"""``python -m autograder``: the ``specdec-course`` command, through its entry point."""

import sys

from autograder.entry import main

if __name__ == "__main__":  # a grading worker imports this module as its __main__ too
    sys.exit(main())
