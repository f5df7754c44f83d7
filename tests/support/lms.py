"""Build LMS downloads the way each LMS names its files, from a list of students.

The rules are the LMSs' own (see ``autograder/intake/*.py`` for the sources); nothing
here is copied from a real download.  Every builder returns ``{member path: bytes}``,
which :func:`write_zip` or :func:`write_tree` puts on disk.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path


def write_zip(path: Path, members: dict[str, bytes], *, wrapper: str | None = None) -> Path:
    """Write ``members`` as a zip at ``path``, inside the folder ``wrapper`` if given."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(f"{wrapper}/{name}" if wrapper else name, data)
    return path


def write_tree(root: Path, members: dict[str, bytes]) -> Path:
    """Write ``members`` as files below ``root``."""
    for name, data in members.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def zipped(files: dict[str, bytes]) -> bytes:
    """A zip (as bytes) of ``files``: what a student uploads when they zip their work."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


# --- Canvas ------------------------------------------------------------------------------------


@dataclass
class CanvasUpload:
    """One file (or text entry) a Canvas student submitted."""

    sortable_name: str  #: "Last, First", as Canvas sorts students
    user_id: int
    attachment_id: int
    file: str  #: the name the student's file had; ignored for a text entry
    data: bytes = b""
    late: bool = False
    anonymous_id: str | None = None  #: set under anonymous grading
    text_entry: bool = False


def canvas_name(sortable_name: str) -> str:
    """Canvas's ``sanitize_user_name`` then ``sanitize_file_name``: lower-case word chars."""
    name = re.sub(r"_(\d+)_", r"\1", sortable_name).lower()
    return re.sub(r"[^\w]", "", name)


def canvas_download(uploads: list[CanvasUpload]) -> dict[str, bytes]:
    """Canvas's "Download Submissions" members; a repeated file name gets ``-N``."""
    members: dict[str, bytes] = {}
    seen: dict[tuple[int, str], int] = {}
    for up in uploads:
        ident = f"anon_{up.anonymous_id}" if up.anonymous_id else str(up.user_id)
        parts = [None if up.anonymous_id else canvas_name(up.sortable_name)]
        parts += ["LATE" if up.late else None, ident]
        prefix = "_".join(p for p in parts if p)
        if up.text_entry:
            members[f"{prefix}_text.html"] = up.data or b"<p>my answer</p>"
            continue
        file = up.file
        n = seen.get((up.user_id, file), 0)
        seen[(up.user_id, file)] = n + 1
        if n:
            stem, dot, ext = file.rpartition(".")
            file = f"{stem}-{n}.{ext}" if dot else f"{file}-{n}"
        members[f"{prefix}_{up.attachment_id}_{file}"] = up.data
    return members


def canvas_gradebook(students: list[tuple[str, int, str]], assignments: dict[str, str]) -> str:
    """A Canvas gradebook export: ``(sortable name, user id, section)`` rows, given columns."""
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *assignments]
    lines = [header, ["    Points Possible", "", "", "", "", *assignments.values()]]
    for name, uid, section in students:
        lines.append(
            [name, str(uid), f"S{uid}", f"login{uid}", section, *["" for _ in assignments]]
        )
    return "\n".join(",".join(_csv_cell(c) for c in row) for row in lines) + "\n"


def _csv_cell(value: str) -> str:
    return f'"{value}"' if ("," in value or '"' in value) else value


# --- Moodle ------------------------------------------------------------------------------------


@dataclass
class MoodleEntry:
    """One file of one Moodle participant's submission."""

    full_name: str
    participant: int
    path: str  #: the file's path inside the submission; ``onlinetext.html`` for online text
    data: bytes = b""
    plugin: str = "file"


def moodle_download(entries: list[MoodleEntry], *, flat: bool = False) -> dict[str, bytes]:
    """Moodle's "Download all submissions": folders per student (default) or flat names."""
    members = {}
    for e in entries:
        prefix = f"{e.full_name}_{e.participant}_assignsubmission_{e.plugin}_"
        members[f"{prefix}{e.path}" if flat else f"{prefix}/{e.path}"] = e.data
    return members


def moodle_worksheet(rows: list[tuple[int, str, str]]) -> str:
    """A Moodle grading worksheet of ``(participant, full name, email)``, grades empty."""
    lines = [
        "Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
        "Last modified (submission),Last modified (grade),Feedback comments"
    ]
    for pid, name, email in rows:
        lines.append(f"Participant {pid},{name},{email},No submission,,4.00,Yes,-,-,")
    return "\n".join(lines) + "\n"


# --- Blackboard --------------------------------------------------------------------------------


@dataclass
class BlackboardAttempt:
    """One attempt of one Blackboard student: its time and files."""

    username: str
    when: datetime
    files: dict[str, bytes] = field(default_factory=dict)


def blackboard_download(
    assignment: str, attempts: list[BlackboardAttempt], *, word: str = "attempt"
) -> dict[str, bytes]:
    """Blackboard's "Download Assignment": each attempt's files plus its ``.txt`` receipt."""
    members = {}
    for a in attempts:
        prefix = f"{assignment}_{a.username}_{word}_{a.when:%Y-%m-%d-%H-%M-%S}"
        members[f"{prefix}.txt"] = (
            f"Name: {a.username}\nAssignment: {assignment}\nDate Submitted: {a.when}\n".encode()
        )
        for name, data in a.files.items():
            members[f"{prefix}_{name}"] = data
    return members


# --- Gradescope --------------------------------------------------------------------------------


@dataclass
class GradescopeSubmission:
    """One Gradescope submission: its id, who submitted it (a group has several), files."""

    id: int
    submitters: list[tuple[str, str, str]]  #: (name, email, sid)
    created_at: datetime
    files: dict[str, bytes] = field(default_factory=dict)


def gradescope_export(submissions: list[GradescopeSubmission]) -> dict[str, bytes]:
    """Gradescope's export: ``submission_{id}/`` folders and ``submission_metadata.yml``."""
    members, yml = {}, []
    for s in submissions:
        folder = f"submission_{s.id}"
        yml.append(f"{folder}:\n  :submitters:")
        for name, email, sid in s.submitters:
            yml.append(f"  - :name: {name}\n    :email: {email}\n    :sid: '{sid}'")
        stamp = s.created_at.strftime("%Y-%m-%d %H:%M:%S.%f000 %z")
        stamp = stamp[:-2] + ":" + stamp[-2:]
        yml.append(f"  :created_at: {stamp}\n  :score: 0.0\n  :status: processed")
        for name, data in s.files.items():
            members[f"{folder}/{name}"] = data
    members["submission_metadata.yml"] = ("\n".join(yml) + "\n").encode()
    return members


# --- GitHub Classroom --------------------------------------------------------------------------


def github_clone(prefix: str, repos: dict[str, dict[str, bytes]]) -> dict[str, bytes]:
    """``gh classroom clone student-repos``: ``{prefix}-{username}/`` repositories, with .git."""
    members = {}
    for user, files in repos.items():
        members[f"{prefix}-{user}/.git/HEAD"] = b"ref: refs/heads/main\n"
        for name, data in files.items():
            members[f"{prefix}-{user}/{name}"] = data
    return members


def github_grades(prefix: str, rows: list[tuple[str, str]]) -> str:
    """A ``gh classroom assignment-grades`` CSV of ``(username, roster identifier)``."""
    lines = [
        "assignment_name,assignment_url,starter_code_url,github_username,roster_identifier,"
        "student_repository_name,student_repository_url,submission_timestamp,points_awarded,"
        "points_available"
    ]
    for user, ident in rows:
        lines.append(
            f"{prefix},https://classroom.github.com/a/x,,{user},{ident},{prefix}-{user},"
            f"https://github.com/org/{prefix}-{user},2026-11-30T12:00:00Z,0,0"
        )
    return "\n".join(lines) + "\n"


# --- nbgrader ----------------------------------------------------------------------------------


def nbgrader_submitted(
    assignment: str, notebook: str, students: dict[str, tuple[bytes, str]]
) -> dict[str, bytes]:
    """``submitted/`` as ``nbgrader collect`` leaves it: ``{student: (notebook, timestamp)}``."""
    members = {}
    for student, (data, stamp) in students.items():
        base = f"{student}/{assignment}"
        members[f"{base}/{notebook}.ipynb"] = data
        members[f"{base}/timestamp.txt"] = stamp.encode()
        members[f"{base}/submission_secret.txt"] = f"secret-{student}".encode()
    return members
