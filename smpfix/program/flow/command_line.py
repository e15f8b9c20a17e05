"""What ``args.name`` holds when a script reads it from ``argparse``: the literal
``add_argument(..., default=...)`` value, or the launcher's hyperparameter that overrides it.

SageMaker passes every estimator hyperparameter to the script as ``--key value``, so a
launcher's ``hyperparameters={"batch-size": 12}`` replaces the default of the argument whose
option is ``--batch-size``. The value is known only when nothing can change it unseen: one
``add_argument`` with that destination (in the script or the project modules it imports),
no assignment to ``args.<name>`` anywhere in the script, and every launcher of the script
either passes a literal for the key or is known not to pass it. Anything else is unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.literals import UNKNOWN
from smpfix.job.linking import LinkedScript
from smpfix.program.facts import FileFacts
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile


@dataclass(frozen=True)
class CommandLineArgument:
    """One ``add_argument`` call: where its value lands and what it defaults to."""

    dest: str
    options: tuple[str, ...]
    default: Any
    integer: bool
    # The ``type=`` converter by name (``"float"``, ``"str"``); None when another callable or
    # an ``action`` decides what the value becomes.
    converter: Optional[str] = "str"


@dataclass(frozen=True)
class ArgumentValue:
    """A resolved value and how it was found, in words for a message. ``default`` says it is
    the argparse default, which a launcher smpfix does not know of could still override."""

    value: Any
    how: str
    default: bool = False
    # Who sets it, as a clause that can follow "runs only when `args.x` is true;":
    # "`--x` defaults to 0 and the launcher launch.py sets 1".
    setting: str = ""


def command_line_arguments(files: Iterable[ParsedFile]) -> dict[str, list[CommandLineArgument]]:
    """Every literal ``add_argument(...)`` in ``files``, by destination."""
    found: dict[str, list[CommandLineArgument]] = {}
    for file in files:
        for parsed in file.answer(ArgumentDefinitions).arguments:
            found.setdefault(parsed.dest, []).append(parsed)
    return found


@dataclass(frozen=True)
class ArgumentDefinitions:
    """The literal ``add_argument(...)`` calls of one file, in call order (read once per tree:
    every script importing a helper module reads its arguments)."""

    arguments: tuple[CommandLineArgument, ...]

    @classmethod
    def of_file(cls, file: ParsedFile) -> ArgumentDefinitions:
        facts = file.facts
        return cls(
            tuple(found for call in facts.call_order if (found := _parse(call, facts)) is not None)
        )


def _parse(call: cst.Call, facts: FileFacts) -> Optional[CommandLineArgument]:
    if not (type(call.func) is cst.Attribute and call.func.attr.value == "add_argument"):
        return None
    options = []
    for arg in call.args:
        if arg.keyword is not None or arg.star:
            break
        value = facts.literal(arg.value)
        if not isinstance(value, str):
            return None
        options.append(value)
    if not options:
        return None
    dest_arg = argument(call, "dest")
    if dest_arg is not None:
        dest = facts.literal(dest_arg.value)
    else:
        dest = _default_dest(options)
    if not isinstance(dest, str):
        return None
    default_arg = argument(call, "default")
    default = facts.literal(default_arg.value) if default_arg is not None else None
    action_arg = argument(call, "action")
    action = facts.literal(action_arg.value) if action_arg is not None else None
    if default_arg is None and action in _FLAG_DEFAULTS:
        default = _FLAG_DEFAULTS[action]  # argparse's own default for a flag
    type_arg = argument(call, "type")
    integer = (
        type_arg is not None and type(type_arg.value) is cst.Name and type_arg.value.value == "int"
    )
    converter: Optional[str] = "str"  # argparse's default: the text itself
    if type_arg is not None:
        converter = (
            type_arg.value.value
            if type(type_arg.value) is cst.Name and type_arg.value.value in _ARGPARSE_TYPES
            else None
        )
    if argument(call, "action") is not None:
        converter = None
    return CommandLineArgument(dest, tuple(options), default, integer, converter)


# What ``add_argument(..., action=...)`` defaults to when it states no ``default``.
_FLAG_DEFAULTS = {"store_true": False, "store_false": True}


def _default_dest(options: Sequence[str]) -> str:
    """argparse's rule: the first long option, else the first short one, without dashes."""
    if not options[0].startswith("-"):
        return options[0]
    long = [option for option in options if option.startswith("--")]
    chosen = long[0] if long else options[0]
    return chosen.lstrip("-").replace("-", "_")


def assigned_attributes(facts: FileFacts) -> set[str]:
    """Attribute names the script assigns (``args.batch_size = ...``): their values may change."""
    return set(facts.attribute_assignments)


def argument_value(
    dest: str,
    arguments: Mapping[str, Sequence[CommandLineArgument]],
    launchers: Sequence[LinkedScript],
) -> Optional[ArgumentValue]:
    """The value ``args.<dest>`` has at run time, or None when it cannot be known."""
    candidates = arguments.get(dest, ())
    if len(candidates) != 1:
        return None
    found = candidates[0]
    option = next((o for o in found.options if o.startswith("--")), found.options[0])
    # The whole switch: a launcher or a person may spell it either way (``--fp16``, ``--amp``).
    aliases = [f"`{o}`" for o in found.options if o != option and o.startswith("--")]
    spelled = f"`{option}`" + (f" (or {', '.join(aliases)})" if aliases else "")
    default = f"the argparse default of {spelled}"
    passed = [_passed(found, link) for link in launchers]
    if any(value is UNKNOWN for value in passed):
        return None
    given = [(value, link) for value, link in zip(passed, launchers) if value is not None]
    if given:
        if len(given) != len(launchers) or len({str(value) for value, _ in given}) != 1:
            return None  # launchers disagree, or some use the default
        value, link = given[0]
        key = next(k for k in link.hyperparameters if f"--{k}" in found.options)
        converted = _converted(value, found)
        if converted is UNKNOWN:
            return None
        shown = (
            f" ({found.default!r})"
            if found.default is not None and found.default is not UNKNOWN
            else ""
        )
        return ArgumentValue(
            converted,
            f"hyperparameter {key!r} from the {link.job.source}, which overrides {default}{shown}",
            setting=(
                f"{spelled} defaults to {found.default!r} and the {link.job.source} sets"
                f" {converted!r}"
                if shown
                else f"the {link.job.source} sets {spelled} to {converted!r}"
            ),
        )
    if found.default is None or found.default is UNKNOWN:
        return None
    return ArgumentValue(
        found.default,
        default,
        default=True,
        setting=f"{spelled} defaults to {found.default!r} and no launcher of this script sets it",
    )


def _passed(found: CommandLineArgument, link: LinkedScript) -> Any:
    """What ``link`` passes for ``found``: a value, None when it passes nothing, UNKNOWN when it
    cannot be told."""
    for key, value in link.hyperparameters.items():
        if f"--{key}" in found.options:
            return value
    return None if link.hyperparameters_complete else UNKNOWN


def _text_to_bool(text: str) -> bool:
    """``transformers.hf_argparser.string_to_bool``: how a ``bool`` field reads its flag."""
    lowered = text.lower()
    if lowered in ("yes", "true", "t", "y", "1"):
        return True
    if lowered in ("no", "false", "f", "n", "0"):
        return False
    raise ValueError(text)


_CONVERTERS: Mapping[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "str": str,
    # A ``bool`` field of an ``HfArgumentParser`` dataclass (argparse's own ``type=bool`` is
    # not followed: it makes any non-empty text true).
    "hf-bool": _text_to_bool,
}
_ARGPARSE_TYPES = frozenset({"int", "float", "str"})


def _converted(value: Any, found: CommandLineArgument) -> Any:
    """The hyperparameter as the script sees it: argparse gets a string, which ``type=int``
    or ``type=float`` converts; another ``type`` or an ``action`` is not followed."""
    convert = _CONVERTERS.get(found.converter or "")
    if convert is None:
        return UNKNOWN
    try:
        return convert(str(value))
    except ValueError:
        return UNKNOWN


def script_argument(
    dest: str, file: ParsedFile, modules: Optional[LocalModules]
) -> Optional[ArgumentValue]:
    """``args.<dest>`` in the checked ``file``: its argparse definitions are looked for in the
    file and the project modules it imports, its launchers among the checked project's."""
    if dest in assigned_attributes(file.facts):
        return None
    files: list[ParsedFile] = [file]
    launchers: Sequence[LinkedScript] = ()
    if modules is not None:
        files += modules.imported_modules(file.facts)
        launchers = modules.project.launchers_of(file.path)
    return argument_value(dest, command_line_arguments(files), launchers)
