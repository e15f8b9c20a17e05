"""The base layer: source text, its LibCST tree, walking it, positions, edits and findings.

Imports nothing of smpfix outside ``smpfix.base``; every other layer builds on it."""
