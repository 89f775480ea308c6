"""Immutable, content-addressed experiment plans: build, file, budget, authorization."""
