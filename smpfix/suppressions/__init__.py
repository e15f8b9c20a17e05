"""Suppression comments (``# smpfix: ignore[...]``, ``# noqa: SMPxxx``): reading, judging, rewriting
them.

May import ``smpfix.base`` only."""
