"""The governed workflow lane (docs/workflow.md): production-touching workflow steps under a
pinned boundary. Built so far: typed exclusive locks on production resources (``locks``)."""
