"""The command answers ``--help`` and usage errors without importing a verb (no nbgrader).

The parser spells out the choices and defaults it offers, so that parsing imports no verb;
these tests check that parsing stays that light and that those values are the verbs' own.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

from autograder import cli

#: What is run: the top level's help, each verb's help, and two usage errors.
ARGVS = [
    ["--help"],
    *([verb, "--help"] for verb in cli.COMMANDS),
    ["grade"],  # no assignment
    ["no-such-verb"],
]

#: Run in a new Python, on stdin (its command line names nothing the marker watcher reads):
#: each command line through the entry point, then the packages outside the standard
#: library that it imported, with the exit code.
PROBE = """
import contextlib, io, json, sys
from autograder import entry

def packages():
    names = {name.split(".")[0] for name in sys.modules}
    return {n for n in names if n not in sys.stdlib_module_names and not n.startswith("__")}

before = packages()
out = []
for argv in json.loads(sys.argv[1]):
    sys.argv = ["specdec-course", *argv]
    code = None
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            entry.main()
        except SystemExit as exc:
            code = exc.code
    out.append([argv, code, sorted(packages() - before - {"autograder"})])
print(json.dumps(out))
"""


def test_help_and_usage_errors_import_nothing_beyond_the_parser():
    done = subprocess.run(
        [sys.executable, "-", json.dumps(ARGVS)],
        input=PROBE,
        capture_output=True,
        text=True,
        check=True,
    )
    results = json.loads(done.stdout)
    assert [argv for argv, _, _ in results] == ARGVS
    # Checked in order, so the first command line that imports something is the one named.
    for argv, code, imported in results:
        assert code == (0 if "--help" in argv else 2), argv
        assert imported == [], f"specdec-course {' '.join(argv)} imported {imported}"


def test_the_parser_offers_the_verbs_own_choices_and_defaults():
    from autograder.export import FORMATS
    from autograder.grade import grade
    from autograder.intake.detect import CHOICES

    parameters = inspect.signature(grade).parameters
    parsed = vars(cli.build_parser().parse_args(["grade", "e7_2_acceptance_tests"]))
    shared = sorted(set(parsed) & set(parameters) - {"assignment"})
    assert {"lms", "workers", "timeout", "notebook_timeout", "gradebook_wait"} <= set(shared)
    assert {name: parsed[name] for name in shared} == {
        name: parameters[name].default for name in shared
    }
    (verbs,) = [a for a in cli.build_parser()._actions if a.dest == "command"]
    (lms,) = [a for a in verbs.choices["grade"]._actions if a.dest == "lms"]
    assert tuple(lms.choices) == CHOICES
    (to,) = [a for a in verbs.choices["export"]._actions if a.dest == "to"]
    assert tuple(to.choices) == FORMATS


def test_every_verb_takes_the_same_course_option():
    (verbs,) = [a for a in cli.build_parser()._actions if a.dest == "command"]
    assert sorted(verbs.choices) == sorted(cli.COMMANDS)
    options = {
        verb: [a for a in parser._actions if a.dest == "course"]
        for verb, parser in verbs.choices.items()
    }
    assert all(len(found) == 1 for found in options.values()), options
    assert {(a.option_strings[0], a.default, a.help) for (a,) in options.values()} == {
        ("--course", None, "course root (default: the current directory; for demo, this checkout)")
    }
    assert all(parser.allow_abbrev is False for parser in verbs.choices.values())
