"""Intake: turn what the instructor hands over (a folder, an LMS zip) into submissions."""
