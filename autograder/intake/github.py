"""GitHub Classroom: ``gh classroom clone student-repos`` output, one repository per student.

The clone writes ``{assignment slug}-submissions/{repository}/...``, the repository
usually named ``{assignment prefix}-{github username}``.  The username is found, in
order, from a ``gh classroom assignment-grades`` roster (``student_repository_name``
-> ``github_username``), from the wrapper folder's slug, or from the prefix that every
repository name shares.
"""

from __future__ import annotations

import os

from autograder.intake.lms import Cell, Lms, RosterColumns, RosterRow
from autograder.intake.records import (
    Claim,
    Context,
    Identity,
    Intake,
    Member,
    assemble,
    split_name,
)

SUFFIX = "-submissions"


def matches(members: list[Member], ctx: Context) -> float:
    """1 for a ``*-submissions`` wrapper or roster repositories; 0.6 for a shared ``x-`` prefix."""
    tops = {m.parts[0] for m in members if len(m.parts) > 1}
    if (ctx.wrapper and ctx.wrapper[-1].endswith(SUFFIX)) or (tops & set(ctx.repos)):
        return 1.0
    return 0.6 if len(tops) > 1 and _shared_prefix(tops) else 0.0


def _shared_prefix(repos: set[str]) -> str:
    common = os.path.commonprefix(sorted(repos))
    return common[: common.rfind("-") + 1] if "-" in common else ""


def usernames(repos: set[str], ctx: Context) -> tuple[dict[str, str], list[str]]:
    """Map each repository to its student's username, and say how when it is a guess.

    >>> usernames({"hw1-ann", "hw1-bo-li"}, Context())[0]["hw1-bo-li"]
    'bo-li'
    >>> usernames({"e7-2-jdoe"}, Context(wrapper=("e7-2-submissions",)))[0]
    {'e7-2-jdoe': 'jdoe'}
    """
    warnings = []
    slug = (
        ctx.wrapper[-1][: -len(SUFFIX)] + "-"
        if ctx.wrapper and ctx.wrapper[-1].endswith(SUFFIX)
        else ""
    )
    shared = _shared_prefix(repos) if len(repos) > 1 else ""
    out = {}
    for repo in sorted(repos):
        if repo in ctx.repos:
            out[repo] = ctx.repos[repo]
        elif slug and repo.startswith(slug) and len(repo) > len(slug):
            out[repo] = repo[len(slug) :]
        elif shared and len(repo) > len(shared):
            out[repo] = repo[len(shared) :]
        else:
            out[repo] = repo
            warnings.append(f"cannot tell the username in repository {repo!r}; used it whole")
    return out, warnings


def parse(members: list[Member], ctx: Context) -> Intake:
    """Parse cloned student repositories into one record per GitHub username."""
    ignored = [f"{m.path} (not in a repository folder)" for m in members if len(m.parts) < 2]
    repos = {m.parts[0] for m in members if len(m.parts) > 1}
    users, warnings = usernames(repos, ctx)
    claims = [
        Claim(
            users[m.parts[0]],
            m,
            base=m.name if m.is_notebook else None,
            identity=Identity(users[m.parts[0]]),
            display_name=users[m.parts[0]],
        )
        for m in members
        if len(m.parts) > 1
    ]
    return assemble(
        "github", claims, ctx.notebook, ignored=ignored, warnings=warnings, drop_empty=True
    )


def roster_row(cell: Cell, first: str | None, last: str | None) -> RosterRow | None:
    """A row of ``gh classroom assignment-grades`` (``github_username``,
    ``roster_identifier``, ``student_repository_name``)."""
    student = cell("github_username")
    if not student:
        return None
    repository, identifier = cell("student_repository_name"), cell("roster_identifier")
    if not (first or last) and identifier and "@" not in identifier:
        first, last = split_name(identifier)
    return RosterRow(student, student, first, last, (identifier, repository), repository)


LMS = Lms(
    "github", matches, parse, RosterColumns(lambda cells: "github_username" in cells, roster_row)
)
