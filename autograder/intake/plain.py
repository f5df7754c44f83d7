"""Plain folders and zips: the student id is the file or folder name.

``<student>.ipynb`` files, or ``<student>/<any path>.ipynb`` folders.  Ids are folded
to safe ASCII (``Zoë Müller`` becomes ``Zoe_Muller``); two names that fold alike stay
two students (``-2`` and a flag).  A stray top-level file that is not a notebook
(``README.txt``) belongs to nobody and is ignored.
"""

from __future__ import annotations

from autograder.intake.lms import Lms
from autograder.intake.records import Claim, Context, Intake, Member, assemble


def parse(members: list[Member], ctx: Context, *, layout: str = "plain") -> Intake:
    """Parse plain names into one record per file stem or top-level folder."""
    claims, ignored = [], []
    for m in members:
        if len(m.parts) == 1:
            if not m.is_notebook and m.problem is None:
                ignored.append(f"{m.path} (not a notebook)")
                continue
            stem = m.name[: -len(".ipynb")] if m.is_notebook else m.name
            # a lone file is the student's notebook whatever its name
            claims.append(Claim(stem, m, base=ctx.wanted or m.name, display_name=stem))
        else:
            claims.append(
                Claim(m.parts[0], m, base=m.name if m.is_notebook else None, display_name=None)
            )
    return assemble(layout, claims, ctx.notebook, ignored=ignored)


#: Never recognised (no ``matches``): the fallback when no other layout is.
LMS = Lms("plain", None, parse)
