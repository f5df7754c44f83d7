"""``specdec-course handout``: a learner's kit, for a learner's own laptop.

``kit.py`` builds the kit (the release notebooks, what to install, a README, the
learner's JupyterLab settings), checks it, and writes it as a folder and a zip.
``pins.py`` says what a learner installs: this package's dependencies, pinned to the
installed versions.  ``learner_files/`` holds the learner's README template.
"""
