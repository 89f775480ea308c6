"""Governed grading: pinned command evaluators, blinded judges, generations, regrade, rejudge."""
