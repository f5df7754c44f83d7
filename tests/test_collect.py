"""Collecting submissions from folders and LMS zips, including hostile input."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.course import UsageError
from autograder.intake import reading
from autograder.intake.collect import collect, collect_class, normalize_student_id
from autograder.intake.spool import Spool, Spooled

NB = nbformat.writes(new_notebook(cells=[new_code_cell("x = 1")])).encode()


def zip_with(path: Path, members: dict[str, bytes], symlinks: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return path


def by_student(subs):
    return {s.student: s for s in subs}


def test_folder_of_student_notebooks(tmp_path):
    (tmp_path / "alice.ipynb").write_bytes(NB)
    (tmp_path / "bob.ipynb").write_bytes(NB)
    (tmp_path / "README.txt").write_text("not a submission")
    subs = by_student(collect(tmp_path))
    assert sorted(subs) == ["alice", "bob"]
    assert subs["alice"].data == NB and subs["alice"].problem is None


def test_folder_of_student_folders_with_any_notebook_name(tmp_path):
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "my work (final).ipynb").write_bytes(NB)
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "acceptance_tests.ipynb").write_bytes(NB)
    subs = by_student(collect(tmp_path, notebook="acceptance_tests"))
    assert sorted(subs) == ["alice", "bob"]
    assert all(s.data == NB for s in subs.values())


@pytest.mark.parametrize("wrapper", ["", "Assignment 2 download/"])
def test_zip_of_files_or_folders_optionally_wrapped(tmp_path, wrapper):
    archive = zip_with(
        tmp_path / "lms.zip",
        {
            f"{wrapper}alice.ipynb": NB,
            f"{wrapper}bob/acceptance_tests.ipynb": NB,
            f"{wrapper}__MACOSX/._alice.ipynb": b"junk",
        },
    )
    subs = by_student(collect(archive))
    assert sorted(subs) == ["alice", "bob"]
    assert subs["bob"].data == NB


def test_zip_slip_and_absolute_paths_are_never_used_as_paths(tmp_path):
    archive = zip_with(
        tmp_path / "evil.zip",
        {
            "alice.ipynb": NB,
            "../escaped.ipynb": NB,
            "/tmp/absolute.ipynb": NB,
            "carol/../../up.ipynb": NB,
        },
    )
    before = set(os.listdir(tmp_path))
    subs = by_student(collect(archive))
    assert set(os.listdir(tmp_path)) == before  # nothing was written anywhere
    assert subs["alice"].problem is None
    unsafe = [s for s in subs.values() if s.problem]
    assert unsafe and all("unsafe path" in s.problem for s in unsafe)
    assert not Path("/tmp/absolute.ipynb").exists()


def test_zip_symlink_members_are_not_followed(tmp_path):
    archive = zip_with(
        tmp_path / "links.zip", {"alice.ipynb": NB}, symlinks={"mallory.ipynb": "/etc/passwd"}
    )
    subs = by_student(collect(archive))
    assert subs["mallory"].data is None
    assert "symbolic link" in subs["mallory"].problem


def test_folder_symlinks_are_not_followed(tmp_path):
    secret = tmp_path / "secret.ipynb"
    secret.write_bytes(NB)
    subs_dir = tmp_path / "subs"
    subs_dir.mkdir()
    (subs_dir / "mallory.ipynb").symlink_to(secret)
    (subs_dir / "alice.ipynb").write_bytes(NB)
    subs = by_student(collect(subs_dir))
    assert subs["mallory"].data is None and "symbolic link" in subs["mallory"].problem


def collected_within(path: Path, seconds: float = 30.0):
    """``collect_class(path)``, failing (not hanging) if it takes longer than ``seconds``."""
    done: list = []
    reader = threading.Thread(target=lambda: done.append(collect_class(path)), daemon=True)
    reader.start()
    reader.join(seconds)
    assert done, f"collecting {path} did not finish in {seconds:g} s (a pipe was opened?)"
    return done[0]


def test_a_named_pipe_in_a_class_folder_is_listed_with_its_reason_and_never_opened(tmp_path):
    (tmp_path / "alice.ipynb").write_bytes(NB)
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "work.ipynb")  # no writer: opening it would block
    os.mkfifo(tmp_path / "pipe.ipynb")

    collected = collected_within(tmp_path)

    subs = by_student(collected.submissions)
    assert sorted(subs) == ["alice", "fifo", "pipe"]
    assert subs["alice"].problem is None
    for student, path in (("fifo", "fifo/work.ipynb"), ("pipe", "pipe.ipynb")):
        assert subs[student].data is None
        assert subs[student].problem == "is a named pipe (not read)"
        assert subs[student].ignored == [f"{path} (is a named pipe (not read))"]
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo" / "work.ipynb").st_mode)  # left as it was


def test_a_folder_and_its_zip_are_admitted_alike(tmp_path, monkeypatch):
    """One policy: every entry not graded is listed, with the same reason, from both."""
    monkeypatch.setattr(reading, "MAX_NOTEBOOK_BYTES", 1000)
    deep = "/".join(f"d{i}" for i in range(12))
    files = {
        "alice.ipynb": NB,
        "bob.ipynb": b"{" + b" " * 5000 + b"}",
        f"carol/{deep}/nb.ipynb": NB,
        "dave/notes.txt": b"I forgot the notebook",
        "erin/hw.ipynb": NB,
        "erin/old/hw.ipynb": NB,
        "frank/.ipynb_checkpoints/hw-checkpoint.ipynb": NB,
        "README.txt": b"the class",
    }
    folder = tmp_path / "class"
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    (folder / "gina").mkdir()
    (folder / "mallory.ipynb").symlink_to(folder / "alice.ipynb")
    archive = zip_with(
        tmp_path / "class.zip",
        {**files, "gina/": b""},
        symlinks={"mallory.ipynb": "alice.ipynb"},
    )

    def admitted(path):
        got = collected_within(path)
        return got.ignored, {s.student: (s.problem, s.ignored) for s in got.submissions}

    from_folder, from_zip = admitted(folder), admitted(archive)

    assert from_folder == from_zip
    ignored, subs = from_folder
    assert ignored == ["README.txt (not a notebook)"]
    assert subs["alice"] == (None, [])
    assert subs["bob"][0] == "file is larger than 0 MiB"
    assert subs["carol"] == ("is nested too deeply", ["carol/deep (is nested too deeply)"])
    assert subs["dave"] == ("no .ipynb notebook found", ["dave/notes.txt (not a notebook)"])
    assert "frank" not in subs  # Jupyter's own copies are no student's entry
    assert subs["gina"] == ("no .ipynb notebook found", [])  # an empty folder is a student
    assert subs["mallory"][0] == "is a symbolic link (not followed)"


def test_too_deep_and_too_large_members_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "MAX_NOTEBOOK_BYTES", 1000)
    deep = "/".join(f"d{i}" for i in range(12))
    archive = zip_with(
        tmp_path / "big.zip",
        {
            "alice.ipynb": NB,
            "bob.ipynb": b"{" + b" " * 5000 + b"}",
            f"carol/{deep}/nb.ipynb": NB,
        },
    )
    subs = by_student(collect(archive))
    assert subs["alice"].problem is None
    assert "larger than" in subs["bob"].problem
    assert "nested too deeply" in subs["carol"].problem


def test_empty_and_non_notebook_files(tmp_path):
    (tmp_path / "empty.ipynb").write_bytes(b"")
    (tmp_path / "dave").mkdir()
    (tmp_path / "dave" / "notes.txt").write_text("I forgot the notebook")
    subs = by_student(collect(tmp_path))
    assert subs["empty"].problem == "the notebook file is empty"
    assert subs["dave"].problem == "no .ipynb notebook found"


def test_several_notebooks_pick_the_assignment_one_or_refuse(tmp_path):
    for student in ("alice", "bob"):
        (tmp_path / student).mkdir()
        (tmp_path / student / "scratch.ipynb").write_bytes(NB)
    (tmp_path / "alice" / "accept_step.ipynb").write_bytes(NB)
    subs = by_student(collect(tmp_path, notebook="accept_step"))
    assert subs["alice"].problem is None and subs["alice"].origin.endswith("accept_step.ipynb")
    assert subs["bob"].problem is None  # only one notebook: it is the submission
    (tmp_path / "bob" / "other.ipynb").write_bytes(NB)
    subs = by_student(collect(tmp_path, notebook="accept_step"))
    assert "several notebooks" in subs["bob"].problem


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("alice", "alice"),
        ("Zoë Müller", "Zoe_Muller"),
        ("  spaces  here ", "spaces_here"),
        ("../../etc/passwd", "etc_passwd"),
        ("李雷", "LiLei"),
        ("\u200b", "student"),
        (".hidden", "hidden"),
        ("a" * 200, "a" * 64),
    ],
)
def test_student_ids_are_normalized_safely(name, expected):
    assert normalize_student_id(name) == expected


def test_ids_that_collide_after_normalization_stay_distinct(tmp_path):
    for name in ("Zoë", "Zoe", "zoe"):
        (tmp_path / f"{name}.ipynb").write_bytes(NB)
    subs = collect(tmp_path)
    ids = [s.student for s in subs]
    assert len(set(ids)) == 3
    assert sorted(ids) == ["Zoe", "Zoe-2", "zoe"]
    assert any(f.startswith("id-collision") for s in subs for f in s.flags)


@pytest.mark.parametrize("make", ["missing", "empty-folder", "not-a-zip"])
def test_no_submissions_is_the_instructors_error(tmp_path, make):
    target = tmp_path / "subs"
    if make == "empty-folder":
        target.mkdir()
    elif make == "not-a-zip":
        target = tmp_path / "subs.zip"
        target.write_text("plain text")
    with pytest.raises(UsageError):
        collect(target)


# ---------------------------------------------------------------------------------------
# The spool: a class's notebooks wait on disk, not in memory
# ---------------------------------------------------------------------------------------


def test_collected_notebooks_wait_in_the_spool_and_are_what_was_read(tmp_path):
    other = NB.replace(b"x = 1", b"x = 2")
    (tmp_path / "alice.ipynb").write_bytes(NB)
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "work.ipynb").write_bytes(other)
    zip_with(tmp_path / "carol.zip", {"carol/hw.ipynb": NB})

    subs = by_student(collect(tmp_path))
    (tmp_path / "alice.ipynb").write_bytes(b"changed after it was read")

    assert all(isinstance(s.content, Spooled) for s in subs.values())
    assert [subs[s].data for s in ("alice", "bob", "carol.zip")] == [NB, other, NB]
    assert subs["alice"].sha256 == hashlib.sha256(NB).hexdigest() == subs["carol.zip"].sha256
    assert subs["bob"].content.size == len(other)


def test_a_spool_that_cannot_be_written_keeps_the_notebooks_in_memory():
    """The spool's file may not grow past 100 kB (RLIMIT_FSIZE, as a full disk refuses it)."""
    script = """
import resource, signal
from autograder.intake.spool import Spool, Spooled
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, resource.RLIM_INFINITY))
spool = Spool()
first, second = spool.put(b"a" * 80_000), spool.put(b"b" * 80_000)
assert isinstance(first, Spooled) and first.read() == b"a" * 80_000, first
assert second == b"b" * 80_000, type(second)
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_two_uploads_as_new_and_different_are_told_apart_by_their_spooled_bytes(tmp_path):
    for student, second in (("ann", NB + b" "), ("bob", NB)):
        for folder, data in (("a", NB), ("b", second)):
            (tmp_path / student / folder).mkdir(parents=True)
            (tmp_path / student / folder / "hw.ipynb").write_bytes(data)

    subs = by_student(collect(tmp_path, notebook="hw"))

    assert subs["ann"].flags == [
        "ambiguous: graded ann/a/hw.ipynb; as new and different: ann/b/hw.ipynb"
    ]
    assert subs["bob"].flags == []  # the same bytes twice: nothing to tell apart


def test_the_spool_is_a_file_without_a_name_in_the_folder_it_is_given(tmp_path):
    def open_files() -> set[str]:
        found = set()
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                found.add(os.readlink(f"/proc/self/fd/{fd}"))
        return found

    before = open_files()
    spool = Spool(tmp_path)
    kept = spool.put(NB)

    (new,) = open_files() - before
    assert new.startswith(str(tmp_path)) and new.endswith("(deleted)"), new
    assert list(tmp_path.iterdir()) == [] and kept.read() == NB
    spool.close()
    assert new not in open_files()
