"""The command-line arguments ``HfArgumentParser`` makes of a script's dataclasses.

Hugging Face scripts declare their switches as dataclass fields
(``fp16: bool = field(default=False, metadata={...})``) and parse them with
``HfArgumentParser((ModelArguments, TrainingArgs)).parse_args_into_dataclasses()``: each
field is an option ``--<field>`` with the field's default, which a launcher's hyperparameter
overrides as for ``add_argument``. Only the classes handed to an ``HfArgumentParser`` in the
script or its project modules count (and the local dataclasses they derive from): another
dataclass's fields are not switches. A field of a base class smpfix cannot see (transformers'
``TrainingArguments``) stays unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.literals import UNKNOWN
from smpfix.program.facts import FileFacts
from smpfix.program.flow.command_line import CommandLineArgument
from smpfix.program.project.parsed_file import ParsedFile

_CONVERTER_OF_TYPE = {"int": "int", "float": "float", "str": "str", "bool": "hf-bool"}


@dataclass(frozen=True)
class DataclassFields:
    """The fields of one file's ``@dataclass`` classes as options, by class name, with each
    class's local bases, and the classes the file hands to an ``HfArgumentParser``."""

    fields: Mapping[str, tuple[CommandLineArgument, ...]]
    bases: Mapping[str, tuple[str, ...]]
    parsed: frozenset[str]

    @classmethod
    def of_file(cls, file: ParsedFile) -> DataclassFields:
        facts = file.facts
        fields: dict[str, tuple[CommandLineArgument, ...]] = {}
        bases: dict[str, tuple[str, ...]] = {}
        for name, node in facts.classes.items():
            if any(_is_dataclass(decorator.decorator) for decorator in node.decorators):
                fields[name] = tuple(_fields(node, facts))
                bases[name] = tuple(
                    base.value.value for base in node.bases if type(base.value) is cst.Name
                )
        parsed = frozenset(
            name
            for call in facts.call_order
            if _called_name(call.func) == "HfArgumentParser" and call.args
            for name in _class_names(call.args[0].value)
        )
        return cls(fields, bases, parsed)


def dataclass_arguments(files: Iterable[ParsedFile]) -> dict[str, list[CommandLineArgument]]:
    """The options of every dataclass an ``HfArgumentParser`` of ``files`` parses, by field."""
    answers = [file.answer(DataclassFields) for file in files]
    pending = [name for answer in answers for name in answer.parsed]
    parsed: set[str] = set()
    while pending:
        name = pending.pop()
        if name not in parsed:
            parsed.add(name)
            pending += [base for answer in answers for base in answer.bases.get(name, ())]
    found: dict[str, list[CommandLineArgument]] = {}
    for answer in answers:
        for name, options in answer.fields.items():
            if name in parsed:
                for option in options:
                    found.setdefault(option.dest, []).append(option)
    return found


def _fields(node: cst.ClassDef, facts: FileFacts) -> Iterable[CommandLineArgument]:
    for statement in node.body.body:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if type(small) is not cst.AnnAssign or type(small.target) is not cst.Name:
                continue
            kind = _type_name(small.annotation.annotation)
            name = small.target.value
            yield CommandLineArgument(
                name,
                (f"--{name}",),
                _default(small.value, facts),
                kind == "int",
                _CONVERTER_OF_TYPE.get(kind or ""),
            )


def _default(value: Optional[cst.BaseExpression], facts: FileFacts) -> Any:
    """The field's default: a literal, ``field(default=...)``; None when it has none (the
    option is required), UNKNOWN when it is computed (``default_factory``)."""
    if value is None:
        return None
    if type(value) is cst.Call and _called_name(value.func) == "field":
        given = argument(value, "default")
        return facts.literal(given.value) if given is not None else UNKNOWN
    return facts.literal(value)


def _type_name(annotation: cst.BaseExpression) -> Optional[str]:
    """``int`` -> "int", ``Optional[int]`` -> "int"; None for any other annotation."""
    if type(annotation) is cst.Name:
        return annotation.value
    if (
        type(annotation) is cst.Subscript
        and _called_name(annotation.value) == "Optional"
        and len(annotation.slice) == 1
        and type(annotation.slice[0].slice) is cst.Index
    ):
        return _type_name(annotation.slice[0].slice.value)
    return None


def _is_dataclass(decorator: cst.BaseExpression) -> bool:
    target = decorator.func if type(decorator) is cst.Call else decorator
    return _called_name(target) == "dataclass"


def _called_name(func: cst.BaseExpression) -> Optional[str]:
    if type(func) is cst.Name:
        return func.value
    if type(func) is cst.Attribute:
        return func.attr.value
    return None


def _class_names(value: cst.BaseExpression) -> Iterable[str]:
    if type(value) is cst.Name:
        yield value.value
    elif isinstance(value, (cst.Tuple, cst.List)):
        for element in value.elements:
            if type(element.value) is cst.Name:
                yield element.value.value
