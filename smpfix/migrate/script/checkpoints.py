"""Checkpoints: ``smp.save_checkpoint``/``smp.resume_from_checkpoint`` -> FSDP state dicts
written and read with ``torch.distributed.checkpoint``.

A v1 partial checkpoint (each rank its shard) becomes an FSDP sharded state dict of the
model and the optimizer, saved and loaded by every rank (the v2 checkpoint page; the
official v2 example's ``save_state_dict``/``FileSystemWriter``; the optimizer loaded with
``load_sharded_optimizer_state_dict``), v1's ``user_content`` in a file of its own. A full
checkpoint becomes the full state dict gathered on rank 0 and written there with
``torch.save``. Loading needs the wrapped model and optimizer, so a resume written before them
moves below. The checkpoints v1 already wrote stay v1's: only an
export to a full (Hugging Face) state dict, made under v1, carries over; the item says how.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.literals import literal_value
from smpfix.migrate import links
from smpfix.migrate.items import Outcome
from smpfix.migrate.script.context import Context, Statement
from smpfix.migrate.script.plan import in_place_of, todo_comment
from smpfix.migrate.script.wrap import code

_EXPORT = (
    "checkpoints v1 already wrote with partial=True cannot be loaded by v2: export one under"
    " v1 first (`smp.save_checkpoint(path, tag, partial=False, model=model)` after"
    " `smp.resume_from_checkpoint(path, tag=tag, partial=True)`, or"
    " `torch.save(model.state_dict(), path)` on rank 0 with `if smp.rank() == 0:`),"
    " then load it with `from_pretrained`/`load_state_dict` before the FSDP wrap"
)


def _argument(call: cst.Call, keyword: str, position: int) -> Optional[cst.BaseExpression]:
    for index, arg in enumerate(call.args):
        if arg.keyword is not None:
            if arg.keyword.value == keyword:
                return arg.value
        elif index == position:
            return arg.value
    return None


def _partial(call: cst.Call) -> Optional[bool]:
    value = _argument(call, "partial", 2)
    if value is None:
        return True
    found = literal_value(value)
    return found if isinstance(found, bool) else None


def _expression_statement(ctx: Context, call: cst.Call) -> Optional[Statement]:
    statement = ctx.statement(call)
    if (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], (cst.Expr, cst.Assign))
        and statement.body[0].value is call
    ):
        body = statement.body[0]
        if isinstance(body, cst.Assign) and (
            len(body.targets) != 1 or type(body.targets[0].target) is not cst.Name
        ):
            return None
        return statement
    return None


def _location(ctx: Context, call: cst.Call, *more: str) -> Optional[str]:
    """Where v1 wrote the checkpoint (its ``path`` and ``tag``), with ``more`` path parts."""
    path = _argument(call, "path", 0)
    if path is None:
        return None
    tag = _argument(call, "tag", 1)
    parts = [code(path), *([code(tag)] if tag is not None else []), *more]
    if len(parts) == 1:
        return parts[0]
    return f"{ctx.plain_module('os')}.path.join({', '.join(parts)})"


def migrate_checkpoints(ctx: Context, anchor: Optional[Statement]) -> None:
    facts = ctx.program.facts
    models = {w.target for w in facts.distributed_models if w.target}
    optimizers = {w.target for w in facts.distributed_optimizers if w.target}
    partial_line: Optional[int] = None
    for call in ctx.calls("save_checkpoint"):
        if _partial(call) is not False and partial_line is None:
            partial_line = ctx.line(call)
        _save(ctx, call)
    for call in ctx.calls("resume_from_checkpoint"):
        if _partial(call) is not False:
            partial_line = ctx.line(call)
        _resume(ctx, call, models, optimizers, anchor)
    if partial_line is not None:
        ctx.plan.add(partial_line, Outcome.REPORT, "v1-checkpoints", _EXPORT, links.CHECKPOINTS)


def _names(ctx: Context) -> tuple[str, str, str]:
    return (
        ctx.fsdp,
        ctx.name("torch.distributed.fsdp", "StateDictType"),
        ctx.module("torch.distributed.checkpoint", "dcp"),
    )


def _save(ctx: Context, call: cst.Call) -> None:
    statement = _expression_statement(ctx, call)
    model = _argument(call, "model", 3)
    optimizer = _argument(call, "optimizer", 4)
    user = _argument(call, "user_content", 5)
    location = _location(ctx, call)
    partial = _partial(call)
    if (
        statement is None
        or type(model) is not cst.Name
        or location is None
        or _argument(call, "tag", 1) is None
    ):
        return
    todo: list[str] = []
    if optimizer is not None and type(optimizer) is not cst.Name and not _is_none(optimizer):
        todo.append(
            f"v1 saved the optimizer as `{code(optimizer)}`: add"
            ' "optimizer": FSDP.optim_state_dict(model, optimizer) where it is one'
        )
        optimizer = None
    fsdp, kind, dcp = _names(ctx)
    m = model.value
    entries = [f'"model": {m}.state_dict()']
    if type(optimizer) is cst.Name:
        entries.append(f'"optimizer": {fsdp}.optim_state_dict({m}, {optimizer.value})')
    user_content = code(user) if user is not None and not _is_none(user) else None
    torch, rank0 = ctx.torch, f"if {ctx.dist}.get_rank() == 0:\n"
    if partial is False:
        # v1's layout: the model's state dict in ``path/tag``, user content beside it.
        full = ctx.name("torch.distributed.fsdp", "FullStateDictConfig")
        lines = [
            f"with {fsdp}.state_dict_type({m}, {kind}.FULL_STATE_DICT,"
            f" {full}(offload_to_cpu=True, rank0_only=True)):\n"
            f"    full_state = {m}.state_dict()\n",
            f"{rank0}    {torch}.save(full_state, {location})\n"
            + (
                f"    {torch}.save({user_content}, {_beside(ctx, call)})\n"
                if user_content is not None
                else ""
            ),
        ]
        message = "full checkpoint -> the full state dict gathered on rank 0, saved there"
    else:
        state = "{" + ", ".join(entries) + "}"
        newest = f'{ctx.plain_module("os")}.path.join({_path(call)}, "newest")'
        lines = [
            f"with {fsdp}.state_dict_type({m}, {kind}.SHARDED_STATE_DICT):\n"
            f"    {dcp}.save_state_dict(state_dict={state},"
            f" storage_writer={dcp}.FileSystemWriter({location}))\n",
            # v1 listed each partial checkpoint in ``path/newest``; scripts read it to resume.
            f"{rank0}"
            + (
                f"    {torch}.save({user_content}, {_user_content_file(ctx, call)})\n"
                if user_content is not None
                else ""
            )
            + f'    with open({newest}, "a") as newest:\n'
            f'        newest.write({_as_text(call)} + "\\n")\n',
        ]
        message = (
            "partial checkpoint -> FSDP sharded state dict saved with torch.distributed.checkpoint"
        )
    _replace(ctx, statement, lines)
    ctx.plan.handle(call.func)
    outcome, link = Outcome.MOVED, links.CHECKPOINTS
    kept = _argument(call, "num_kept_partial_checkpoints", 7)
    if kept is not None and not _is_none(kept):
        todo.append(f"v1 kept the newest {code(kept)} partial checkpoints: delete the older ones")
    if partial is None:
        todo.append(
            "v1 chose partial or full at run time: this writes the sharded form;"
            " write the full one where v1 did"
        )
    if todo:
        what = "; ".join(todo)
        ctx.plan.comment(statement, todo_comment("checkpoints", what, link))
        outcome, message = Outcome.SCAFFOLD, f"{message}; to finish: {what}"
    ctx.plan.add(ctx.line(call), outcome, "checkpoints", f"`smp.save_checkpoint`: {message}", link)


def _resume(
    ctx: Context,
    call: cst.Call,
    models: set[str],
    optimizers: set[str],
    anchor: Optional[Statement],
) -> None:
    """v1's resume (1.12's ``resume_from_checkpoint``): a partial checkpoint from the directory
    ``path/tag``, the newest one (the last line of ``path/newest``) when ``tag`` is None, its
    default; a full one from the file ``path/tag``, which needs a tag. A ``partial`` smpfix
    cannot read is written as v1 ran it: both loads, chosen at run time."""
    statement = _expression_statement(ctx, call)
    if (
        statement is None
        or _argument(call, "path", 0) is None
        or len(models) != 1
        or len(optimizers) > 1
    ):
        return
    partial = _partial(call)
    if partial is False and _tag_or_none(call) is None:
        return  # v1 raised (a full checkpoint needs a tag): left to a person
    m = next(iter(models))
    load_optimizer = literal_value(_argument(call, "load_optimizer", 4) or cst.Name("True"))
    optimizer = next(iter(optimizers)) if optimizers and load_optimizer is not False else None
    target = _target(statement)
    if partial is True:
        lines = _sharded_load(ctx, call, m, optimizer, target)
        outcome = Outcome.MOVED
        message = (
            "partial checkpoint -> FSDP sharded state dict loaded with torch.distributed.checkpoint"
        )
    else:
        full = _full_load(ctx, call, m, target)
        todo = "a v1 full checkpoint holds the model's state dict: check its keys match the model"
        message = "full checkpoint -> loaded into the FSDP model"
        if partial is None:
            flag = _argument(call, "partial", 2)
            assert flag is not None
            lines = [
                f"if {code(flag)}:\n"
                + _indented(_sharded_load(ctx, call, m, optimizer, target))
                + "else:\n"
                + _indented(full)
            ]
            message = (
                "partial or full checkpoint, as v1 chose at run time -> the FSDP sharded"
                " state dict loaded with torch.distributed.checkpoint, or the full one loaded"
                " into the FSDP model"
            )
        else:
            lines = full
        ctx.plan.comment(statement, todo_comment("checkpoints", todo, links.CHECKPOINTS))
        outcome, message = Outcome.SCAFFOLD, f"{message}; to finish: {todo}"
    _replace(ctx, statement, lines)
    ctx.plan.handle(call.func)
    place = _placement(ctx, statement, _last_of_setup(ctx, anchor))
    if place == "moved":
        message += ", after the FSDP wrap and the optimizer"
    elif place == "early":
        todo = "this runs before the FSDP wrap and the optimizer it loads into: move it below them"
        ctx.plan.comment(statement, todo_comment("checkpoints", todo, links.CHECKPOINTS))
        outcome, message = Outcome.SCAFFOLD, f"{message}; to finish: {todo}"
    ctx.plan.add(
        ctx.line(call),
        outcome,
        "checkpoints",
        f"`smp.resume_from_checkpoint`: {message}",
        links.CHECKPOINTS,
    )


def _sharded_load(
    ctx: Context, call: cst.Call, m: str, optimizer: Optional[str], target: Optional[str]
) -> list[str]:
    """The statements loading a partial checkpoint the migrated save wrote: the directory
    ``path/tag``, the tag read from ``path/newest`` when it is None."""
    fsdp, kind, dcp = _names(ctx)
    os_name = ctx.plain_module("os")
    path = _path(call)
    lookup, tag = _resume_tag(ctx, call)
    location = f"{os_name}.path.join({path}, {tag})"
    body = [
        f'    checkpoint = {{"model": {m}.state_dict()}}',
        f"    {dcp}.load_state_dict(state_dict=checkpoint,"
        f" storage_reader={dcp}.FileSystemReader({location}))",
        f'    {m}.load_state_dict(checkpoint["model"])',
    ]
    if optimizer is not None:
        sharded = ctx.name(
            "torch.distributed.checkpoint.optimizer", "load_sharded_optimizer_state_dict"
        )
        body += [
            f'    optimizer_state = {sharded}(model_state_dict=checkpoint["model"],'
            f' optimizer_key="optimizer", storage_reader={dcp}.FileSystemReader({location}))',
            f"    {optimizer}.load_state_dict({fsdp}.optim_state_dict_to_load("
            f'model={m}, optim={optimizer}, optim_state_dict=optimizer_state["optimizer"]))',
        ]
    lines = [
        *lookup,
        f"with {fsdp}.state_dict_type({m}, {kind}.SHARDED_STATE_DICT):\n" + "\n".join(body) + "\n",
    ]
    if target is not None:
        user_file = f'{os_name}.path.join({path}, {tag}, "user_content.pt")'
        lines.append(_load_user_content(ctx, target, user_file))
    return lines


def _resume_tag(ctx: Context, call: cst.Call) -> tuple[list[str], str]:
    """The statements that find the tag a partial resume loads, and the expression naming it:
    a string as written; the last line of ``path/newest`` (one tag a line, as the migrated
    save appends them) for None; for any other expression, which may be None at run time,
    the one or the other."""
    tag = _tag_or_none(call)
    if isinstance(tag, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return [], code(tag)
    newest = f'{ctx.plain_module("os")}.path.join({_path(call)}, "newest")'
    if tag is None:
        return [
            f"with open({newest}) as newest:\n    newest_tag = newest.read().splitlines()[-1]\n"
        ], "newest_tag"
    return [
        f"resume_tag = {code(tag)}\n",
        "if resume_tag is None:\n"
        f"    with open({newest}) as newest:\n"
        "        resume_tag = newest.read().splitlines()[-1]\n",
    ], "resume_tag"


def _full_load(ctx: Context, call: cst.Call, m: str, target: Optional[str]) -> list[str]:
    """The statements loading a full checkpoint: v1's file ``path/tag`` holds the model's
    state dict, loaded on every rank; a call without a tag raised in v1 and does here."""
    if _tag_or_none(call) is None:
        return ['raise ValueError("a tag is required to load a full checkpoint")\n']
    fsdp, kind, _ = _names(ctx)
    full = ctx.name("torch.distributed.fsdp", "FullStateDictConfig")
    location = _location(ctx, call)
    lines = [
        f"with {fsdp}.state_dict_type({m}, {kind}.FULL_STATE_DICT,"
        f" {full}(rank0_only=False)):\n"
        f'    {m}.load_state_dict({ctx.torch}.load({location}, map_location="cpu"))\n'
    ]
    if target is not None:
        lines.append(_load_user_content(ctx, target, _beside(ctx, call)))
    return lines


def _tag_or_none(call: cst.Call) -> Optional[cst.BaseExpression]:
    """The ``tag`` argument; None when it is left out or written ``None`` (v1's default)."""
    tag = _argument(call, "tag", 1)
    return None if tag is None or _is_none(tag) else tag


def _indented(lines: list[str]) -> str:
    return "".join(
        "".join(f"    {line}\n" if line else "\n" for line in each.splitlines()) for each in lines
    )


def _last_of_setup(ctx: Context, anchor: Optional[Statement]) -> Optional[Statement]:
    """The wrap's statement, or the optimizer's when it follows the wrap in the same block."""
    if anchor is None:
        return None
    facts = ctx.program.facts
    at = facts.statement_of(anchor)
    last = anchor
    for wrap in facts.distributed_optimizers:
        where = wrap.where
        if (
            where is not None
            and at is not None
            and where.block is at.block
            and where.index > at.index
        ):
            if isinstance(where.statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                last = where.statement
    return last


def _placement(ctx: Context, statement: Statement, anchor: Optional[Statement]) -> str:
    """Where a resume goes: "moved" below ``anchor`` (it was above it in the same block),
    "early" (a statement holding it is above ``anchor``: a person moves it), else "kept"."""
    if anchor is None:
        return "kept"
    facts = ctx.program.facts
    at = facts.statement_of(anchor)
    for node in (statement, *ctx.ancestors(statement)):
        where = facts.statement_of(node)
        if where is None or at is None or where.block is not at.block:
            continue
        if where.index >= at.index:
            return "kept"
        if node is statement:
            ctx.plan.move_after(statement, anchor)
            return "moved"
        return "early"
    return "kept"


def _load_user_content(ctx: Context, target: str, file: str) -> str:
    """``target = torch.load(file)``, None when there is no such file (as v1 returned)."""
    exists = f"{ctx.plain_module('os')}.path.isfile({file})"
    return f"{target} = {ctx.torch}.load({file}) if {exists} else None\n"


def _path(call: cst.Call) -> str:
    path = _argument(call, "path", 0)
    assert path is not None
    return code(path)


def _tag(call: cst.Call) -> str:
    tag = _argument(call, "tag", 1)
    assert tag is not None
    return code(tag)


def _as_text(call: cst.Call) -> str:
    """The tag as a string expression: a string literal or f-string as written, else
    ``str(tag)``."""
    tag = _argument(call, "tag", 1)
    if isinstance(tag, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return code(tag)
    return f"str({_tag(call)})"


def _beside(ctx: Context, call: cst.Call) -> str:
    """v1's file of a full checkpoint's user content: ``path/user_content_<tag>``."""
    os_name = ctx.plain_module("os")
    return f'{os_name}.path.join({_path(call)}, "user_content_" + {_as_text(call)})'


def _user_content_file(ctx: Context, call: cst.Call) -> str:
    """Where v1's ``user_content`` goes: a file of its own next to the shards (a nested dict
    in a distributed checkpoint is flattened into its leaves, so it would not load back as a
    whole), written by rank 0 and read by every rank."""
    found = _location(ctx, call, '"user_content.pt"')
    assert found is not None
    return found


def _target(statement: Statement) -> Optional[str]:
    """The name a statement ``name = call(...)`` assigns, else None."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    body = statement.body[0]
    if isinstance(body, cst.Assign) and isinstance(body.targets[0].target, cst.Name):
        return body.targets[0].target.value
    return None


def _is_none(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Name and node.value == "None"


def _replace(ctx: Context, statement: Statement, lines: list[str]) -> None:
    ctx.plan.replace_statement(statement, in_place_of(*lines))


def migrate_objects(ctx: Context) -> None:
    """``smp.save(obj, f, partial=False)`` saved on rank 0 alone, ``smp.load(f, partial=False)``
    loaded on every rank (v1's source): PyTorch's own calls, the save under a rank-0 test. The
    partial forms name one file per model-parallel rank, which has no v2 meaning."""
    for call in ctx.calls("save", "load"):
        member = ctx.member(call.func)
        if _object_partial(call, 2 if member == "save" else 1) is not False:
            continue
        rest = [
            arg
            for index, arg in enumerate(call.args)
            if not (arg.keyword is not None and arg.keyword.value == "partial")
            and not (arg.keyword is None and index == (2 if member == "save" else 1))
        ]
        arguments = ", ".join(
            code(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for arg in rest
        )
        if member == "load":
            ctx.plan.replace_with(call, f"{ctx.torch}.load({arguments})")
            message = "`smp.load(..., partial=False)` -> `torch.load(...)`"
        else:
            statement = _expression_statement(ctx, call)
            if statement is None or _target(statement) is not None:
                continue
            _replace(
                ctx,
                statement,
                [f"if {ctx.dist}.get_rank() == 0:\n    {ctx.torch}.save({arguments})\n"],
            )
            message = "`smp.save(..., partial=False)` -> `torch.save(...)` on rank 0, as v1 did"
        ctx.plan.handle(call.func)
        ctx.plan.add(ctx.line(call), Outcome.MOVED, "checkpoints", message, links.CHECKPOINTS)


def _object_partial(call: cst.Call, position: int) -> Optional[bool]:
    value = _argument(call, "partial", position)
    if value is None:
        return True
    found = literal_value(value)
    return found if isinstance(found, bool) else None
