"""Editing one entry of a configuration dict in place: its value, or its key.

Fixes of configuration rules rewrite a value (``5e8`` -> ``500000000``) or rename a key
(``tensor_parallelism_degree`` -> ``tensor_parallel_degree``). Only what is written in the
entry itself is edited: a value reached through a name (``bucket = 5e8`` ...
``"sdp_reduce_bucket_size": bucket``) may be used elsewhere too, and a value read from a JSON
file or set with ``d["k"] = v`` has no key node to rename, so those get no fix.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.literals import literal_value
from smpfix.job.launcher import Located


def written_in_entry(located: Located) -> bool:
    """Whether the value's node is the value of its own ``"key": value`` entry
    (or ``key=value``)."""
    entry, node = located.entry, located.node
    if node is None or not isinstance(entry, (cst.DictElement, cst.Arg)):
        return False
    return entry.value is node


def value_in_entry(located: Located) -> Optional[Located]:
    """``located`` when a fix may replace its value in place, else None."""
    return located if written_in_entry(located) else None


def renamed_key(located: Located, key: str, new: str) -> Optional[tuple[Located, str]]:
    """A replacement (for ``ConfigFix.replace``) renaming ``key`` to ``new`` in the entry that
    wrote ``located``, keeping the key's quote style; None when the key is not a plain literal."""
    entry = located.entry
    if isinstance(entry, cst.DictElement) and isinstance(entry.key, cst.SimpleString):
        if literal_value(entry.key) != key or not new.isidentifier():
            return None
        string = entry.key
        return Located(key, string, entry), f"{string.prefix}{string.quote}{new}{string.quote}"
    if (
        isinstance(entry, cst.Arg)
        and entry.keyword is not None
        and entry.keyword.value == key
        and new.isidentifier()
    ):
        return Located(key, entry.keyword, entry), new
    return None
