"""Which model the launched script trains, and how many parameters it has.

Three sources, most authoritative first:

1. the ``model_parameters`` job setting (``--job`` or ``[tool.smpfix.job]``), for what
   smpfix cannot read; a shape found in the script still sizes the activations;
2. a Hugging Face configuration built in the script (``GPT2Config(n_embd=args.hidden_width,
   ...)``), each size keyword traced to argparse defaults and the launcher's hyperparameters;
3. ``from_pretrained("<name>")`` of a model or configuration class, for the checkpoints whose
   published dimensions smpfix knows (``checkpoints``).

Unknown stays unknown: a size keyword smpfix cannot resolve, a checkpoint it does not know,
or two different models built in the same code give no count, and so no verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from smpfix.job.jobfacts import JobFacts
from smpfix.plan.checkpoints import find_checkpoint
from smpfix.plan.custom_models import ModelReader
from smpfix.plan.hf_configs import CONFIG_CLASSES, shape_from_config, size_keywords
from smpfix.plan.models import ModelShape, ParameterCount, count_parameters, parameters_only
from smpfix.plan.script_code import ScriptCode
from smpfix.plan.script_flow import project_classes
from smpfix.plan.script_setup import reachable
from smpfix.plan.script_values import ImportedClass, ScriptValues
from smpfix.program.facts import FileFacts
from smpfix.program.objects.hf_models import class_name, is_config_class, pretrained_model_call
from smpfix.program.project.parsed_file import ParsedFile

MODEL_PARAMETERS = "model_parameters"
_ANY_SIZE_KEYWORD = frozenset().union(*(size_keywords(name) for name in CONFIG_CLASSES))
_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}
_LOADERS = frozenset({"from_pretrained", "from_json_file"})
# ``model_type`` of a Hugging Face ``config.json``, as the configuration class it builds.
_MODEL_TYPES = {spec.family: name for name, spec in CONFIG_CLASSES.items()}


@dataclass(frozen=True)
class FoundModel:
    """The count (None: unknown), the shape when known, and in words where the count came
    from or why it is unknown."""

    count: Optional[ParameterCount]
    shape: Optional[ModelShape]
    source: str


@dataclass(frozen=True)
class _ModelCandidate:
    count: Optional[ParameterCount]
    shape: Optional[ModelShape]
    description: str


def _unresolved(description: str) -> _ModelCandidate:
    return _ModelCandidate(None, None, description)


def _of_shape(shape: ModelShape, description: str) -> _ModelCandidate:
    return _ModelCandidate(count_parameters(shape), shape, description)


def parse_parameter_count(value: Any) -> Optional[int]:
    """``20000000000``, ``2e10``, ``"20B"``, ``"1.5e9"``, ``"350M"``: the count, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if value >= 1 else None
    if isinstance(value, str):
        match = re.fullmatch(
            r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmbt]?)\s*", value.lower().replace("_", "")
        )
        if match:
            number = float(match.group(1)) * _SUFFIXES.get(match.group(2), 1)
            return int(number) if number >= 1 else None
    return None


def find_model(
    code: Optional[ScriptCode], values: Optional[ScriptValues], job: JobFacts
) -> FoundModel:
    found = (
        _from_script(code, values)
        if code is not None and values is not None
        else FoundModel(None, None, "")
    )
    setting = job.settings.get(MODEL_PARAMETERS)
    if setting is None:
        return (
            found
            if found.source
            else FoundModel(None, None, "the launched script is not among the checked files")
        )
    total = parse_parameter_count(setting.value)
    if total is None:
        return FoundModel(
            None,
            None,
            f"model_parameters {setting.value!r} is not a parameter count ({setting.source})",
        )
    source = f"model_parameters = {total:,} ({setting.source})"
    if found.shape is None or found.count is None:
        return FoundModel(parameters_only(total), None, source)
    split = found.count
    scale = total / split.total
    count = ParameterCount(
        total, round(split.in_layers * scale), round(split.small * scale), split.layers
    )
    return FoundModel(count, found.shape, f"{source}; layer shape from {found.source}")


@dataclass(frozen=True)
class ModelCalls:
    """The calls of one file that may build a model, in source order: Hugging Face
    configurations and ``from_pretrained`` calls (``library``), and calls of a plain name,
    which may be a project's own model class (``by_name``). Read once per tree: every
    launcher that starts a script, or imports a shared helper, plans over the same calls."""

    library: tuple[cst.Call, ...]
    by_name: tuple[cst.Call, ...]
    # Calls of a name assigned in the file (``config_type(**config_kwargs)``, where each
    # model-type branch assigns ``config_type``): the class is what the taken branch assigns.
    dispatched: tuple[cst.Call, ...] = ()

    @classmethod
    def of_file(cls, file: ParsedFile) -> ModelCalls:
        facts = file.facts
        library = tuple(
            call
            for call in facts.call_order
            if class_name(facts, call.func) in CONFIG_CLASSES
            or (type(call.func) is cst.Attribute and call.func.attr.value in _LOADERS)
        )
        by_name = tuple(call for call in facts.call_order if type(call.func) is cst.Name)
        assigned = facts.names.assignments
        dispatched = tuple(
            call
            for call in by_name
            if call.func.value in assigned  # type: ignore[attr-defined]
            and class_name(facts, call.func) not in CONFIG_CLASSES
        )
        return cls(library, by_name, dispatched)


def _from_script(code: ScriptCode, values: ScriptValues) -> FoundModel:
    """Hugging Face configurations and checkpoints first; the project's own ``nn.Module``
    models only when there are none (a wrapper module may hold a Hugging Face model). Calls
    under an ``if`` known not to run (``if args.fine_tune > 0:`` with the default 0) do not count;
    the ``if`` tests are read only around a call that builds a model, the rare one."""
    found = [
        candidate
        for linked in code.modules
        for call in (*linked.answer(ModelCalls).library, *linked.answer(ModelCalls).dispatched)
        if (candidate := _candidate(code, values, linked, call)) is not None
        and reachable(code, values, linked, call) is not False
        and not _builds_nothing(values, linked, call)
    ]
    if not found:
        reader = ModelReader(code.modules)
        found = [
            candidate
            for linked in code.modules
            for call in linked.answer(ModelCalls).by_name
            if (candidate := _custom(code, values, reader, linked, call)) is not None
            and reachable(code, values, linked, call) is not False
        ]
    unresolved = [candidate.description for candidate in found if candidate.count is None]
    resolved: dict[ParameterCount, _ModelCandidate] = {}
    for candidate in found:
        if candidate.count is not None:
            resolved.setdefault(candidate.count, candidate)
    if unresolved:
        return FoundModel(None, None, unresolved[0])
    if len(resolved) > 1:
        described = "; ".join(candidate.description for candidate in resolved.values())
        return FoundModel(
            None,
            None,
            f"{code.name} builds several models ({described}): which one trains is unclear",
        )
    if not resolved:
        return FoundModel(
            None,
            None,
            f"no model configuration, known checkpoint or countable model class in {code.name} "
            "or the project modules it imports; set model_parameters in [tool.smpfix.job]",
        )
    candidate = next(iter(resolved.values()))
    return FoundModel(candidate.count, candidate.shape, candidate.description)


def _builds_nothing(values: ScriptValues, linked: ParsedFile, call: cst.Call) -> bool:
    """A configuration assigned to a name whose every model-building reader
    (``AutoModelForCausalLM.from_config(config)``, ``GPTJForCausalLM(config)``) is in a branch
    that does not run: the GPT-J example builds a ``GPTJConfig`` always, and a model from it
    only without ``finetune_6b``, which its launcher sets. A configuration no model-building
    call reads still counts (it may reach a model in a way smpfix does not follow)."""
    statement = linked.facts.call_statements.get(call)
    small = (
        statement.statement.body[0]
        if statement is not None and type(statement.statement) is cst.SimpleStatementLine
        else None
    )
    if (
        type(small) is not cst.Assign
        or small.value is not call
        or len(small.targets) != 1
        or type(small.targets[0].target) is not cst.Name
    ):
        return False
    name = small.targets[0].target.value
    builders = [
        other
        for other in linked.facts.call_order
        if _builds_model(linked.facts, other)
        and any(
            type(arg.value) is cst.Name
            and arg.value.value == name
            and any(
                a.value is call for a in linked.facts.names.reaching(name, arg.value).assignments
            )
            for arg in other.args
        )
    ]
    return bool(builders) and all(values.reachable(linked, other) is False for other in builders)


def _builds_model(facts: FileFacts, call: cst.Call) -> bool:
    func = call.func
    if type(func) is cst.Attribute and func.attr.value == "from_config":
        return True
    name = class_name(facts, func)
    return bool(name) and name[:1].isupper() and name not in CONFIG_CLASSES  # type: ignore[index]


def _candidate(
    code: ScriptCode, values: ScriptValues, linked: ParsedFile, call: cst.Call
) -> Optional[_ModelCandidate]:
    facts = linked.facts
    name = class_name(facts, call.func)
    if name is not None and name in CONFIG_CLASSES:
        if name in project_classes(code.modules):
            return None  # the project's own class of that name: its keywords are its own
        return _configuration(code, values, linked, call, name)
    if type(call.func) is cst.Name:
        held = values.of(call.func, facts).value
        if isinstance(held, ImportedClass) and held.name in CONFIG_CLASSES:
            return _configuration(code, values, linked, call, held.name)
        return None
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "from_json_file":
        owner = class_name(facts, func.value)
        if owner is not None and owner in CONFIG_CLASSES:
            return _json_file(code, values, linked, call, owner)
        return None
    if isinstance(func, cst.Attribute) and func.attr.value == "from_pretrained":
        if pretrained_model_call(facts, call) is call or is_config_class(facts, func.value):
            return _checkpoint(code, values, linked, call)
    return None


def _json_file(
    code: ScriptCode, values: ScriptValues, linked: ParsedFile, call: cst.Call, owner: str
) -> _ModelCandidate:
    """``BertConfig.from_json_file(args.config_file)``: the sizes in the JSON file the path
    names, read relative to the script (the BERT tutorial's ``bert_config.json``)."""
    where = f"`{owner}.from_json_file(...)` at {code.where(linked, call)}"
    path = values.of(call.args[0].value, linked.facts) if call.args else None
    if path is None or not isinstance(path.value, str):
        return _unresolved(f"{where}: the file name cannot be resolved")
    data = code.read_json(path.value)
    if not isinstance(data, dict):
        return _unresolved(f"{where}: {path.value!r} cannot be read as JSON in the project")
    return _from_json(owner, data, f"{where}: the sizes in {path.value!r}" + _traced(path))


def _from_json(owner: str, data: dict[str, Any], description: str) -> _ModelCandidate:
    shape = shape_from_config(owner, {key: value for key, value in data.items()})
    if shape is None:
        return _unresolved(f"{description} are not numbers smpfix can read")
    return _of_shape(shape, description)


def _local_config(code: ScriptCode, name: str, description: str) -> Optional[_ModelCandidate]:
    """``from_pretrained("./model")`` of a folder (or file) in the project with a Hugging Face
    ``config.json``: the class its ``model_type`` names, with its sizes."""
    for written in (f"{name.rstrip('/')}/config.json", name):
        data = code.read_json(written)
        if isinstance(data, dict):
            owner = _MODEL_TYPES.get(str(data.get("model_type", "")).replace("-", "_"))
            if owner is None:
                return _unresolved(
                    f"{description}: {written!r} has a model_type smpfix does not know"
                )
            return _from_json(owner, data, f"{description}: the sizes in {written!r}")
    return None


def _traced(value: Any) -> str:
    return f" ({'; '.join(value.how)})" if value.how else ""


def _configuration(
    code: ScriptCode, values: ScriptValues, linked: ParsedFile, call: cst.Call, name: str
) -> _ModelCandidate:
    spelled = call.func.value if type(call.func) is cst.Name else name
    shown = f"`{name}(...)`" if spelled == name else f"`{spelled}(...)`, a {name},"
    where = f"{shown} at {code.where(linked, call)}"
    written: dict[str, tuple[cst.BaseExpression, FileFacts]] = {}
    for arg in call.args:
        if arg.keyword is not None:
            written[arg.keyword.value] = (arg.value, linked.facts)
            continue
        unpacked = values.mapping(arg.value, linked.facts) if arg.star == "**" else None
        if unpacked is None:
            return _unresolved(f"{where} takes positional or ** arguments smpfix cannot read")
        written.update(unpacked)
    keywords: dict[str, Any] = {}
    traced: list[str] = []
    relevant = size_keywords(name)
    for keyword, (expression, facts) in written.items():
        if keyword not in relevant:
            continue
        value = values.of(expression, facts=facts)
        if not value.known:
            return _unresolved(
                f"{where}: {keyword} cannot be resolved (no literal, argparse default or launcher "
                "hyperparameter)"
            )
        keywords[keyword] = value.value
        traced.extend(part for part in value.how if part not in traced)
    shape = shape_from_config(name, keywords)
    if shape is None:
        return _unresolved(f"{where} has a size keyword that is not a number")
    detail = f" ({'; '.join(traced)})" if traced else ""
    return _of_shape(shape, f"{where}{detail}")


def _checkpoint(
    code: ScriptCode, values: ScriptValues, linked: ParsedFile, call: cst.Call
) -> _ModelCandidate:
    owner = (
        class_name(linked.facts, call.func.value)
        if isinstance(call.func, cst.Attribute)
        else "from_pretrained"
    )
    shown = f"`{owner}.from_pretrained(...)`"
    where = f"{shown} at {code.where(linked, call)}"
    first = next(
        (
            arg
            for arg in call.args
            if arg.keyword is None or arg.keyword.value == "pretrained_model_name_or_path"
        ),
        None,
    )
    if first is None or first.star:
        return _unresolved(f"{where}: the checkpoint name cannot be read")
    name = values.of(first.value, linked.facts)
    if not name.known or not isinstance(name.value, str):
        return _unresolved(f"{where}: the checkpoint name cannot be resolved")
    if any(arg.keyword is not None and arg.keyword.value in _ANY_SIZE_KEYWORD for arg in call.args):
        return _unresolved(f"{where} overrides the size of {name.value!r}")
    checkpoint = find_checkpoint(name.value)
    local = _local_config(code, name.value, where) if checkpoint is None else None
    if local is not None:
        return local
    if checkpoint is None:
        return _unresolved(
            f"{where} loads {name.value!r}, a checkpoint whose dimensions smpfix does not know"
        )
    detail = f"; {name.explained()}" if name.how else ""
    return _of_shape(
        checkpoint.shape, f"{where}: the published dimensions of {name.value!r}{detail}"
    )


def _custom(
    code: ScriptCode,
    values: ScriptValues,
    reader: ModelReader,
    linked: ParsedFile,
    call: cst.Call,
) -> Optional[_ModelCandidate]:
    """``GPT(args.vocab, args.hidden, ...)`` of a project ``nn.Module`` class, built outside
    any class (inside one, it is a submodule of another model)."""
    name = call.func.value if isinstance(call.func, cst.Name) else None
    if name is None or not reader.is_model_class(name):
        return None
    if any(isinstance(ancestor, cst.ClassDef) for ancestor in code.parents(linked).ancestors(call)):
        return None
    where = f"`{name}(...)` at {code.where(linked, call)}"
    if any(arg.star for arg in call.args):
        return _unresolved(f"{where} takes * arguments smpfix cannot read")
    traced: list[str] = []
    arguments: list[Any] = []
    keywords: dict[str, Any] = {}
    for arg in call.args:
        value = values.of(arg.value, linked.facts)
        if not value.known:
            return _unresolved(f"{where}: an argument cannot be resolved")
        traced.extend(value.how)
        if arg.keyword is None:
            arguments.append(value.value)
        else:
            keywords[arg.keyword.value] = value.value
    model = reader.model(name, tuple(arguments), keywords)
    if model is None:
        return _unresolved(
            f"{where} builds layers smpfix cannot count (only torch.nn layers and project modules "
            "are read)"
        )
    detail = f" ({'; '.join(traced)})" if traced else ""
    return _ModelCandidate(
        model.count, model.shape, f"{where}, counted from its torch.nn layers{detail}"
    )
