"""Rendering: the learner's feedback pages, the instructor's report, the terminal summary."""
