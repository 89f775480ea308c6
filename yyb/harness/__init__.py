"""Everything that touches a source repository or runs a process: snapshots, sandbox, adapters."""
