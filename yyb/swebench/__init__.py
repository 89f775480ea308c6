"""SWE-bench instances as yyb cases: reading instance records, writing case files."""
