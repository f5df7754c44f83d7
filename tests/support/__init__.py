"""Helpers the test suite shares: courses, lessons, processes, and the real services.

Each module owns one kind of helper; ``conftest.py`` holds only pytest's hooks and the
fixtures built from these.

``course``
    Throwaway courses built from the repository's real configuration, notebooks filled
    in with learner code, and the mini assignment's right answers (one copy).
``lessons``
    A lesson's source notebook run in this process for its hidden-test tests, and Run
    all in a real kernel.
``processes``
    Free ports, and stopping a process together with everything it started.
``browser``, ``dask_cluster``, ``postgres_server``
    A JupyterLab server for Chromium, a Dask scheduler and workers, a PostgreSQL server:
    each the real thing, started on 127.0.0.1.
``hub``
    A JupyterHub class on 127.0.0.1: the learners' local accounts, nbgrader's exchange,
    the hub with its proxy, and the learners' single-user servers.
``lms``
    LMS downloads and grade sheets built from each LMS's own naming and import rules.
``variants``
    What a learner who works their own numbers by hand types, for lessons with variants.
"""
