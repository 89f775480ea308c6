"""yyb: coding-agent runs as evidence anyone can re-verify offline."""

__version__ = "0.1.0"
