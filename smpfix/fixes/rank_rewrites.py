"""Rewriting the rank and size calls a data expression reads into another rank group's.

``files[smp.rank()::smp.size()]`` -> ``files[smp.dp_rank()::smp.dp_size()]``: each call keeps
the file's own spelling of the library, and a variable holding one call is replaced by the
new call written the file's way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import libcst as cst

from smpfix.base.edits import NodeEdit, ReplaceNode
from smpfix.base.imports import SMP_TORCH
from smpfix.fixes.references import smp_reference
from smpfix.program.facts import RANK_FUNCTIONS
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.program.ranks.rank_terms import RankTerm


def replacement(member: str, family: str) -> str:
    """``rank`` -> ``dp_rank``, ``size`` -> ``dp_size`` (for family ``dp``)."""
    return f"{family}_rank" if member in RANK_FUNCTIONS else f"{family}_size"


def rewrite_terms(
    terms: Sequence[RankTerm],
    family: str,
    file: ParsedFile,
    flavour: str = SMP_TORCH,
) -> Optional[tuple[NodeEdit, ...]]:
    """Edits turning each term into the same kind of call of ``family``; None if one cannot be.

    A library call keeps its spelling and only its name changes (``mp.rank`` ->
    ``mp.dp_rank``); a ``torch.distributed`` call or a variable is replaced by the library
    call written the file's way (adding it to a ``from ... import`` when that is how the
    file names the library).
    """
    edits: list[NodeEdit] = []
    for term in terms:
        member = replacement(term.member, family)
        if not term.exact:
            return None
        if term.node is term.call and term.from_library and type(term.call.func) is cst.Attribute:
            edits.append(ReplaceNode(term.call.func.attr, member))
            continue
        reference = smp_reference(file, member, flavour)
        if reference is None:
            return None
        edits.extend(reference.edits)
        if term.node is term.call:
            edits.append(ReplaceNode(term.call.func, reference.text))
        else:
            edits.append(ReplaceNode(term.node, f"{reference.text}()"))
    return _unique(edits)


def _unique(edits: Sequence[NodeEdit]) -> tuple[NodeEdit, ...]:
    """The same import addition asked for twice is made once."""
    seen: list[NodeEdit] = []
    for edit in edits:
        if edit not in seen:
            seen.append(edit)
    return tuple(seen)
