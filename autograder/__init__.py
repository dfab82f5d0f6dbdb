"""Grader for the course pack: hidden pytest tests run against learner code in a sandbox."""
