"""A store kept in an S3-compatible bucket: its client, journal, view, transfers and check."""
