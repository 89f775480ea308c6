"""The benchmark's nouns over the store: ref names, record types, the rules that read a chain."""
