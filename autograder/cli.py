"""``specdec-course``: parse arguments, call the verb, print, set the exit code.

Exit codes: 0 success (whatever the submissions did), 1 a refused release or kit,
2 the instructor's error (unknown assignment, no submissions, unreadable course),
3 grading stopped because the course could not be written (gradebook locked, disk full).

Each verb is one :class:`Verb` in :data:`COMMANDS`: its help, a function that adds its
arguments, and the function that runs it.  Parsing the arguments imports no verb: each
verb's module (and nbgrader, under most of them) is imported by the function that runs
it, so that ``--help`` and a usage error answer at once.  The layout names and the export
formats come from the LMS registry (:mod:`autograder.intake.detect`, which imports no
third-party package), and ``grade``'s defaults from :mod:`autograder.defaults`, which
imports nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from autograder import defaults
from autograder.course import UsageError, find_course
from autograder.intake.detect import CHOICES as LMS_CHOICES
from autograder.intake.detect import EXPORT_FORMATS
from autograder.lab import lab


def _course_option() -> argparse.ArgumentParser:
    """The ``--course`` option every verb takes, as a parent parser."""
    parent = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parent.add_argument(
        "--course",
        type=Path,
        help="course root (default: the current directory; for demo, this checkout)",
    )
    return parent


def build_parser() -> argparse.ArgumentParser:
    """The command's parser: one subparser per verb of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="specdec-course",
        description="Release and grade the chapter E7 (speculative decoding) assignments.",
        allow_abbrev=False,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    course = [_course_option()]
    for name, verb in COMMANDS.items():
        verb.arguments(sub.add_parser(name, parents=course, allow_abbrev=False, help=verb.help))
    return parser


def _release_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("assignment", nargs="?")
    p.add_argument("--all", action="store_true", help="every assignment in source/")
    p.add_argument(
        "--no-check",
        action="store_true",
        help="skip autograding the source (full marks) and the release (zero)",
    )


def _grade_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("assignment")
    p.add_argument(
        "--submissions",
        type=Path,
        help="an LMS download (zip or folder), a folder of <student>.ipynb or "
        "<student>/<any>.ipynb, or a zip of either (default: the course's own submitted/, "
        "graded in place)",
    )
    p.add_argument(
        "--lms",
        choices=LMS_CHOICES,
        default=defaults.LMS,
        help="the download's layout (default: %(default)s, recognised from its names)",
    )
    p.add_argument(
        "--roster",
        type=Path,
        help="class roster CSV exported from the LMS (names, ids, students who sent nothing)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="local worker processes (default: number of CPUs; not used with Dask)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per cell (default: the course's Execute.timeout)",
    )
    p.add_argument(
        "--notebook-timeout",
        type=float,
        default=defaults.NOTEBOOK_TIMEOUT,
        help="seconds per notebook (default: %(default)s)",
    )
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run learner code WITHOUT the sandbox (only for code you trust)",
    )
    p.add_argument(
        "--no-fork",
        action="store_true",
        help="start each sandboxed kernel afresh instead of forking it from a warm parent",
    )
    p.add_argument("--force", action="store_true", help="regrade unchanged submissions too")
    engine = p.add_mutually_exclusive_group()
    engine.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="grade on the Dask cluster of this scheduler (tcp://HOST:8786 or tls://...)",
    )
    engine.add_argument(
        "--cluster",
        metavar="local[:N]",
        help="grade on a Dask LocalCluster of N one-thread workers (default N: CPUs)",
    )
    p.add_argument(
        "--security",
        type=Path,
        metavar="DIR",
        help="Dask TLS: a folder holding ca.pem, cert.pem and key.pem (see docs/cluster.md#tls)",
    )

    p.add_argument(
        "--gradebook-wait",
        type=float,
        default=defaults.GRADEBOOK_WAIT,
        help="seconds to wait for a gradebook another program keeps locked (default: %(default)s)",
    )


def _export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("assignment")
    p.add_argument("--to", required=True, choices=EXPORT_FORMATS, help="the LMS (or csv)")
    p.add_argument(
        "--roster",
        type=Path,
        help="your own gradebook or worksheet download from that LMS, to fill in",
    )
    p.add_argument("--out", type=Path, help="file to write (default: reports/<assignment>/)")
    p.add_argument("--title", help="the assignment's title (its column) in the LMS")


def _feedback_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("assignment")
    p.add_argument("--student")


def _assignment_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("assignment")


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=None)


def _handout_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("assignment", nargs="?")
    p.add_argument("--all", action="store_true", help="every assignment in source/")
    p.add_argument(
        "--out",
        type=Path,
        help="the kit's folder (default: dist/<course id>[-<assignment>] in the course); "
        "the zip is written beside it",
    )
    p.add_argument(
        "--force", action="store_true", help="replace a kit that handout wrote there before"
    )


def _lab_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int)
    p.add_argument("--no-browser", action="store_true")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # After the parsing: nbgrader's gradebook, under the verbs that grade.
    from autograder.grading.gradebook import RecordError

    try:
        return _dispatch(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RecordError as exc:
        if args.command != "grade":  # a verb that only reads the gradebook: nothing to finish
            print(f"error: {exc}; nothing was written, run the same command again", file=sys.stderr)
            return 3
        print(
            f"error: grading stopped: {exc}\nEverything recorded so far is kept (results/); "
            "run the same command again to finish the batch.",
            file=sys.stderr,
        )
        return 3
    except KeyboardInterrupt:
        print(
            "interrupted: finished submissions are recorded; run the same command again to "
            "grade the rest",
            file=sys.stderr,
        )
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    return COMMANDS[args.command].run(args)


def _release(args: argparse.Namespace) -> int:
    from autograder.release import ReleaseError, release

    try:
        reports = release(
            args.assignment, course=args.course, all=args.all, check=not args.no_check
        )
    except ReleaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for r in reports:
        checks = ""
        for nb, (score, total) in r.source_scores.items():
            blank = r.release_scores.get(nb, (0, total))[0]
            checks += f" (source {score:g}/{total:g}, blank release {blank:g}/{total:g}"
            hand = r.by_hand.get(nb, 0)
            checks += f"; {hand:g} more graded by hand, not checked)" if hand else ")"
        for path in r.notebooks:
            print(f"released {path.relative_to(find_course(args.course))}{checks}")
    return 0


def _grade(args: argparse.Namespace) -> int:
    from autograder.grade import grade
    from autograder.render.terminal import ProgressPrinter, print_summary

    with ProgressPrinter() as progress:
        result = grade(
            args.assignment,
            submissions=args.submissions,
            course=args.course,
            workers=args.workers,
            timeout=args.timeout,
            notebook_timeout=args.notebook_timeout,
            sandbox=not args.no_sandbox,
            fork=not args.no_fork,
            force=args.force,
            progress=progress,
            lms=args.lms,
            roster=args.roster,
            scheduler=args.scheduler,
            cluster=args.cluster,
            security=args.security,
            gradebook_wait=args.gradebook_wait,
        )
    print_summary(result)
    return 0


def _export(args: argparse.Namespace) -> int:
    from autograder.export import export

    done = export(
        args.assignment,
        to=args.to,
        course=args.course,
        roster=args.roster,
        out=args.out,
        title=args.title,
    )
    print(f"wrote {done.path} ({done.students} student(s), for {done.to})")
    for line in done.skipped:
        print(f"not in the file: {line}")
    for line in done.waiting:
        print(f"waiting for grading by hand: {line}")
    return 0


def _feedback(args: argparse.Namespace) -> int:
    from autograder.feedback import feedback

    for path in feedback(args.assignment, course=find_course(args.course), student=args.student):
        print(path)
    return 0


def _report(args: argparse.Namespace) -> int:
    from autograder.report import report

    print(report(args.assignment, course=find_course(args.course)))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from autograder.demo import demo

    return demo(repo=args.course, workers=args.workers)


def _handout(args: argparse.Namespace) -> int:
    from autograder.handout.kit import HandoutError, handout

    try:
        kit = handout(
            args.assignment, course=args.course, all=args.all, out=args.out, force=args.force
        )
    except HandoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for lesson in kit.lessons:
        print(f"{lesson.title}: {', '.join(lesson.notebooks)}")
    print(f"wrote {kit.folder} and {kit.zip} ({len(kit.files)} files)")
    return 0


def _lab(args: argparse.Namespace) -> int:
    return lab(course=find_course(args.course), port=args.port, open_browser=not args.no_browser)


@dataclass(frozen=True)
class Verb:
    """One subcommand: its help line, its arguments, and what runs it."""

    help: str
    arguments: Callable[[argparse.ArgumentParser], None]  #: adds the verb's own arguments
    run: Callable[[argparse.Namespace], int]  #: runs it on the parsed arguments; exit code


#: Every verb, by its subcommand's name, in the order ``--help`` lists them.
COMMANDS = MappingProxyType(
    {
        "release": Verb(
            "generate release/ from source/, refusing a bad release", _release_arguments, _release
        ),
        "grade": Verb("autograde a folder or zip of submissions", _grade_arguments, _grade),
        "export": Verb("write the grades as a file the LMS imports", _export_arguments, _export),
        "feedback": Verb(
            "write one HTML feedback page per student", _feedback_arguments, _feedback
        ),
        "report": Verb("write reports/<assignment>/report.html", _assignment_argument, _report),
        "demo": Verb(
            "release, grade the sample submissions, write feedback and report",
            _demo_arguments,
            _demo,
        ),
        "handout": Verb(
            "write a learner's kit for laptops (notebooks, pinned packages, README): "
            "a folder and a zip",
            _handout_arguments,
            _handout,
        ),
        "lab": Verb(
            "open JupyterLab on release/ (learner view, with Validate)", _lab_arguments, _lab
        ),
    }
)


if __name__ == "__main__":
    sys.exit(main())
