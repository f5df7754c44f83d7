"""Grading: one job per submission, run on a pool of workers, scored.

* :mod:`~autograder.grading.plan`: what a run does with each student: keep the earlier
  result, record it as it is, or grade it (a pure function);
* :mod:`~autograder.grading.template`: the scratch course every job copies;
* :mod:`~autograder.grading.job`: one submission, graded in a worker (nbgrader's
  ``Autograde`` with the grader's preprocessors and the sandbox);
* :mod:`~autograder.grading.scratch_db`: a job's scratch gradebook (no disk syncs);
* :mod:`~autograder.grading.spare`: the kernel a worker starts ahead for its next job;
* :mod:`~autograder.grading.processes`: a job's processes, their marker and memory;
* :mod:`~autograder.grading.scoring`: an executed notebook to cell scores and a status;
* :mod:`~autograder.grading.results`: the typed results and their JSON;
* :mod:`~autograder.grading.pool`: jobs on an executor, surviving crashed workers;
* :mod:`~autograder.grading.gradebook`: the course's gradebook held open, waited for
  while locked; :class:`~autograder.grading.gradebook.RecordError`;
* :mod:`~autograder.grading.gradebook_grades`: the grades read back from the gradebook,
  a grader's review included: the one source of every score that leaves the tool;
* :mod:`~autograder.grading.students`: who each student is and when they submitted;
* :mod:`~autograder.grading.forkserver`: the local pool's forkserver, and what it imports;
* :mod:`~autograder.grading.cluster_pool`: connecting to a Dask cluster for a run, and
  checking its scheduler and workers;
* :mod:`~autograder.grading.cluster_executor`: jobs as Dask tasks, behind the same
  ``Executor`` interface as the local pool;
* :mod:`~autograder.grading.cluster_worker`: the Dask worker side: a preload that vets a
  worker, a plugin that equips it.
"""
