"""Reports: figures derived from retained evidence, stored as report layers."""
