"""Attempts: dispatch, sandboxed execution, retained evidence, terminals (yyb run)."""
