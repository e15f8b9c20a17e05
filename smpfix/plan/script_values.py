"""What an expression in the launched script evaluates to, and how smpfix knows it.

A plan reads sizes and switches the script computes from its command line:
``GPT2Config(n_embd=args.hidden_width)``, ``flash_attention=args.flash_attention > 0``,
``dtype=torch.float16``. This folds literals, names bound once, ``args.<name>`` through
argparse (the launcher's hyperparameters overriding the defaults:
``smpfix.program.flow.command_line``), ``smp.tp_size()`` and ``smp.pp_size()`` from the job, SMP
v2's ``tsm.state.<setting>`` from the v2 settings a v2 plan gives (``with_v2_state``; the official
v2 example tests ``tsm.state.sm_activation_offloading``), ``torch`` dtypes, and arithmetic,
comparisons and boolean operations over those. Anything else is ``UNKNOWN``: nothing is executed
and nothing is guessed. Each value carries, in words, the argparse values it rests on, for the
plan's assumptions.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

import libcst as cst

from smpfix.base.imports import dotted_name
from smpfix.base.literals import UNKNOWN
from smpfix.job.jobfacts import JobFacts
from smpfix.job.linking import LinkedScript
from smpfix.plan import script_flow
from smpfix.plan.script_tokenizers import tokenizer_max_length
from smpfix.program.facts import FileFacts
from smpfix.program.flow.command_line import (
    argument_value,
    assigned_attributes,
    command_line_arguments,
)
from smpfix.program.project.parsed_file import ParsedFile

_MAX_DEPTH = 12
# Call sites read for what one parameter receives: more are a library function's, not a script's.
_MAX_CALL_SITES = 8
_BUILTINS: Mapping[str, Callable[..., Any]] = {"min": min, "max": max}
_DTYPES = {
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "float": "fp32",
}
_V2_STATE = "torch.sagemaker.state."
_SIZE_SETTINGS = {"tp_size": "tensor_parallel_degree", "pp_size": "pipeline_parallel_degree"}
_ARITHMETIC: Mapping[type, Callable[[Any, Any], Any]] = {
    cst.Add: operator.add,
    cst.Subtract: operator.sub,
    cst.Multiply: operator.mul,
    cst.FloorDivide: operator.floordiv,
    cst.Divide: operator.truediv,
}
_COMPARISONS: Mapping[type, Callable[[Any, Any], Any]] = {
    cst.Equal: operator.eq,
    cst.NotEqual: operator.ne,
    cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le,
    cst.GreaterThan: operator.gt,
    cst.GreaterThanEqual: operator.ge,
    cst.Is: operator.is_,
    cst.IsNot: operator.is_not,
}


@dataclass(frozen=True)
class Traced:
    """A value (``UNKNOWN`` when smpfix cannot know it) and the argparse values it rests on."""

    value: Any
    how: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return self.value is not UNKNOWN

    def explained(self) -> str:
        return "; ".join(self.how)


_UNKNOWN = Traced(UNKNOWN)


def _shown(file: ParsedFile) -> str:
    return file.path.replace("\\", "/").rsplit("/", 1)[-1]


def _is_library_class(qualified: str) -> bool:
    """A Hugging Face class (``transformers.GPT2Config``): a model or configuration a name may
    hold. Other imported names (a project's ``USE_FLASH``) stay unknown."""
    last = qualified.rsplit(".", 1)[-1]
    return qualified.startswith("transformers.") and last[:1].isupper() and not last.isupper()


@dataclass(frozen=True)
class ImportedClass:
    """The value of a name that holds an imported class (``config_type = GPT2Config``): what a
    call of that name builds, by its qualified name (``transformers.GPT2Config``)."""

    qualified: str

    @property
    def name(self) -> str:
        return self.qualified.rsplit(".", 1)[-1]


class ScriptValues:
    """Evaluates expressions of the script a launcher starts (and the modules it imports)."""

    def __init__(
        self,
        files: Sequence[ParsedFile],
        launchers: Sequence[LinkedScript],
        job: JobFacts,
        launcher_file: Optional[ParsedFile] = None,
    ) -> None:
        self.files = tuple(file.facts for file in files)
        self.parsed = tuple(files)
        # The launcher's own file (a notebook's joined cells): its data preparation is read too.
        self.launcher_file = launcher_file
        self._file_of = {
            id(file.facts): file for file in (*files, *((launcher_file,) if launcher_file else ()))
        }
        # Attributes whose writes are being weighed: inside, they read as before the writes.
        self._weighing: frozenset[str] = frozenset()
        self.launchers = tuple(launchers)
        self.job = job
        # ``torch.sagemaker.state.<key>``: the SMP v2 settings, for a v2 plan only.
        self._v2_state: Mapping[str, Traced] = {}
        self._arguments = command_line_arguments(files)
        self._known: dict[int, tuple[cst.BaseExpression, FileFacts, Traced]] = {}
        # What each parameter receives (by the ``Param`` node, kept alive with its answer); a
        # parameter being worked out (a recursive function) is unknown meanwhile.
        self._parameters: dict[int, tuple[cst.Param, Traced]] = {}
        self._names: dict[int, tuple[cst.Name, Traced]] = {}
        self._assigned = (
            set().union(*(assigned_attributes(facts) for facts in self.files))
            if self.files
            else set()
        )

    def with_job(self, job: JobFacts) -> ScriptValues:
        """The same script under another job: its argparse arguments and assigned attributes
        are read once (they do not depend on the job), its answers are worked out again."""
        values = copy.copy(self)
        values.job = job
        values._known = {}
        values._parameters = {}
        values._names = {}
        return values

    def with_v2_state(self, state: Mapping[str, tuple[Any, str]]) -> ScriptValues:
        """The same script where ``tsm.state.<key>`` is the SMP v2 setting ``key``: its value
        and, in words, where it comes from (the settings SMP v2 initialises its state from)."""
        values = copy.copy(self)
        values._v2_state = {
            key: Traced(value, (f"`tsm.state.{key}` = {value!r} ({source})",))
            for key, (value, source) in state.items()
        }
        values._known = {}
        values._parameters = {}
        values._names = {}
        return values

    def argument(self, dest: str, depth: int = 0) -> Traced:
        """``args.<dest>``: the launcher's hyperparameter, else the argparse default. A script
        that writes the attribute keeps that value when every write sits in a branch known not
        to run (a model type the launcher does not choose); with one write that runs
        (``args.train_batch_size = args.train_batch_size // args.gradient_accumulation_steps``)
        it is the written value, the one the code after the write reads; anything else is
        unknown."""
        if dest in self._assigned and dest not in self._weighing:
            return self._rewritten(dest, depth)
        return self._passed(dest)

    def _passed(self, dest: str) -> Traced:
        found = argument_value(dest, self._arguments, self.launchers)
        if found is None:
            return _UNKNOWN
        origin = "argparse default" if found.default else "launcher hyperparameter"
        return Traced(found.value, (f"`{dest}` = {found.value!r} ({origin})",))

    def _rewritten(self, dest: str, depth: int) -> Traced:
        """``dest`` after the script's writes of it, each weighed with ``dest`` read as before
        the writes (its own guard, ``if args.x > 0: args.x = 0``, reads the old value)."""
        if depth > _MAX_DEPTH:
            return _UNKNOWN
        outer = self._weighing
        self._weighing = outer | {dest}
        try:
            running: list[tuple[ParsedFile, cst.BaseSmallStatement, Optional[bool]]] = []
            for file in self.parsed:
                writes = file.answer(script_flow.AttributeWrites).by_attribute.get(dest, ())
                for write in writes:
                    runs = self.reachable(file, write, depth + 1)
                    if runs is not False:
                        running.append((file, write, runs))
            if not running:
                return self._passed(dest)
            if len(running) > 1 or running[0][2] is not True:
                return _UNKNOWN
            file, write, _ = running[0]
            if type(write) is not cst.Assign or len(write.targets) != 1:
                return _UNKNOWN
            if any(isinstance(a, (cst.For, cst.While)) for a in file.parents.ancestors(write)):
                return _UNKNOWN
            value = self.of(write.value, file.facts, depth + 1)
            if not value.known:
                return _UNKNOWN
            return Traced(value.value, (*value.how, f"`{dest}` rewritten in {_shown(file)}"))
        finally:
            self._weighing = outer

    def reachable(self, file: ParsedFile, node: cst.CSTNode, depth: int = 0) -> Optional[bool]:
        """Whether the ``if`` tests around ``node`` let it run: True, False, or None when a test
        is unknown."""
        result: Optional[bool] = True
        for test, wanted in script_flow.branches(file.parents, node):
            found = self.of(test, file.facts, depth)
            if not found.known:
                result = None
            elif bool(found.value) != wanted:
                return False
        if file is not self.launcher_file and script_flow.never_used(self.parsed, file, node):
            return False
        for test in script_flow.returned_before(file.parents, node):
            found = self.of(test, file.facts, depth)
            if found.known and found.value:
                return False  # ``if model_name: return ...`` taken: nothing after it runs
        return result

    def file_of(self, facts: FileFacts) -> Optional[ParsedFile]:
        return self._file_of.get(id(facts))

    def mapping(
        self, expr: cst.BaseExpression, facts: FileFacts, depth: int = 0
    ) -> Optional[dict[str, tuple[cst.BaseExpression, FileFacts]]]:
        """The keys and value expressions of the dict ``expr`` holds (a ``**`` operand): a
        dict literal, a name whose one assignment that may run holds one, or the call of a
        project function that returns one; None when smpfix cannot list its keys."""
        for _ in range(_MAX_DEPTH):
            expr = facts.names.value(expr)
            if type(expr) is cst.Dict:
                found: dict[str, tuple[cst.BaseExpression, FileFacts]] = {}
                for element in expr.elements:
                    key = facts.literal(element.key) if type(element) is cst.DictElement else None
                    if not isinstance(key, str):
                        return None
                    found[key] = (element.value, facts)
                return found
            if type(expr) is cst.Name:
                file = self.file_of(facts)
                chosen = self._assignment(file, expr, depth) if file is not None else None
                if chosen is None:
                    return None
                expr = chosen
                continue
            if type(expr) is cst.Call and type(expr.func) is cst.Name:
                defined = script_flow.project_function(self.parsed, expr.func.value)
                values = script_flow.returned(defined.function) if defined else ()
                if defined is None or len(values) != 1:
                    return None
                expr, facts = values[0], defined.file.facts
                continue
            return None
        return None

    def has_argument(self, dest: str) -> bool:
        return dest in self._arguments

    def of(self, expr: cst.BaseExpression, facts: FileFacts, depth: int = 0) -> Traced:
        """What ``expr`` evaluates to. A plan asks about the same expressions again and
        again (each ``if`` test around each call), so answers at the top are remembered."""
        if depth:
            return self._of(expr, facts, depth)
        known = self._known.get(id(expr))
        if known is not None and known[0] is expr and known[1] is facts:
            return known[2]
        found = self._of(expr, facts, 0)
        self._known[id(expr)] = (expr, facts, found)  # the node kept alive: its id stays its own
        return found

    def _of(self, expr: cst.BaseExpression, facts: FileFacts, depth: int) -> Traced:
        if depth > _MAX_DEPTH:
            return _UNKNOWN
        expr = facts.names.value(expr)
        literal = facts.literal(expr)
        if literal is not UNKNOWN:
            return Traced(literal)
        # Exact node types (LibCST's have no subclasses): isinstance goes through ABCMeta.
        if type(expr) is cst.Name:
            return self._name(expr, facts, depth)
        if type(expr) is cst.Attribute:
            return self._attribute(expr, facts, depth)
        if type(expr) is cst.Call:
            return self._call(expr, facts, depth)
        if type(expr) is cst.UnaryOperation:
            inner = self.of(expr.expression, facts, depth + 1)
            if not inner.known:
                return _UNKNOWN
            if type(expr.operator) is cst.Not:
                return Traced(not inner.value, inner.how)
            return self._apply(
                operator.neg if type(expr.operator) is cst.Minus else operator.pos, (inner,)
            )
        if type(expr) is cst.BinaryOperation:
            function = _ARITHMETIC.get(type(expr.operator))
            if function is None:
                return _UNKNOWN
            return self._apply(
                function,
                (self.of(expr.left, facts, depth + 1), self.of(expr.right, facts, depth + 1)),
            )
        if type(expr) is cst.Comparison:
            return self._comparison(expr, facts, depth)
        if type(expr) is cst.BooleanOperation:
            left = self.of(expr.left, facts, depth + 1)
            if not left.known:
                return _UNKNOWN
            if bool(left.value) == (type(expr.operator) is cst.And):
                right = self.of(expr.right, facts, depth + 1)
                return Traced(right.value, left.how + right.how) if right.known else _UNKNOWN
            return left
        if type(expr) is cst.IfExp:
            test = self.of(expr.test, facts, depth + 1)
            if not test.known:
                return _UNKNOWN
            chosen = self.of(expr.body if test.value else expr.orelse, facts, depth + 1)
            return Traced(chosen.value, test.how + chosen.how) if chosen.known else _UNKNOWN
        return _UNKNOWN

    def _name(self, expr: cst.Name, facts: FileFacts, depth: int) -> Traced:
        """A name several assignments or a parameter may give: the one assignment whose
        branch may run, or what every call of the function passes, when they agree. Each
        name is worked out once (branches over branches would otherwise multiply)."""
        known = self._names.get(id(expr))
        if known is not None and known[0] is expr:
            return known[1]
        found = self._name_value(expr, facts, depth)
        if not self._weighing:
            self._names[id(expr)] = (expr, found)
        return found

    def _name_value(self, expr: cst.Name, facts: FileFacts, depth: int) -> Traced:
        qualified = facts.qualified_name(expr)
        if qualified is not None and _is_library_class(qualified):
            return Traced(ImportedClass(qualified))
        file = self.file_of(facts)
        if (
            file is None
            or expr.value not in facts.names.assignments
            and not self._parameter_of(file, expr)
        ):
            return _UNKNOWN
        reaching = facts.names.reaching(expr.value, expr)
        if reaching.opaque:
            if reaching.assignments or len(reaching.others) != 1:
                return _UNKNOWN
            parameter = reaching.others[0]
            if type(parameter) is not cst.Param:
                return _UNKNOWN
            return self._parameter(file, parameter, depth)
        chosen = self._assignment(file, expr, depth)
        return self.of(chosen, facts, depth + 1) if chosen is not None else _UNKNOWN

    @staticmethod
    def _parameter_of(file: ParsedFile, expr: cst.Name) -> bool:
        function = script_flow.enclosing_function(file, expr)
        if function is None:
            return False
        params = function.params
        return any(
            param.name.value == expr.value
            for param in (*params.posonly_params, *params.params, *params.kwonly_params)
        )

    def _assignment(
        self, file: ParsedFile, expr: cst.Name, depth: int
    ) -> Optional[cst.BaseExpression]:
        """The value of the one assignment of ``expr`` that reaches it and whose branch may
        run (``config_type = GPT2Config`` under ``if model_type == "gpt2":``)."""
        reaching = file.facts.names.reaching(expr.value, expr)
        if reaching.opaque or not reaching.assignments:
            return None
        live = [
            assignment
            for assignment in reaching.assignments
            if assignment.where is None
            or self.reachable(file, assignment.where.statement, depth + 1) is not False
        ]
        return live[0].value if len(live) == 1 else None

    def _parameter(self, file: ParsedFile, parameter: cst.Param, depth: int) -> Traced:
        """What every call of the parameter's (top-level) function in the project passes for
        it, when those calls that may run agree. Worked out once per parameter."""
        known = self._parameters.get(id(parameter))
        if known is not None and known[0] is parameter:
            return known[1]
        self._parameters[id(parameter)] = (parameter, _UNKNOWN)  # until it is known
        found = self._passed_to(file, parameter, depth)
        if self._weighing:  # read with some attributes as before their writes: not kept
            del self._parameters[id(parameter)]
        else:
            self._parameters[id(parameter)] = (parameter, found)
        return found

    def _passed_to(self, file: ParsedFile, parameter: cst.Param, depth: int) -> Traced:
        function = script_flow.enclosing_function(file, parameter)
        if function is None or script_flow.enclosing_function(file, function) is not None:
            return _UNKNOWN
        name = function.name.value
        if script_flow.project_function(self.parsed, name) is None:
            return _UNKNOWN
        sites = [
            (caller, call)
            for caller in self.parsed
            for call in caller.answer(script_flow.FileFunctions).calls.get(name, ())
        ]
        if not sites or len(sites) > _MAX_CALL_SITES:
            return _UNKNOWN
        agreed: Optional[Traced] = None
        for caller, call in sites:
            if self.reachable(caller, call, depth + 1) is False:
                continue
            written = script_flow.passed(call, function, parameter)
            if written is None:
                return _UNKNOWN
            value = self.of(written, caller.facts, depth + 1)
            if not value.known or (agreed is not None and agreed.value != value.value):
                return _UNKNOWN
            agreed = agreed or value
        return agreed if agreed is not None else _UNKNOWN

    def _attribute(self, expr: cst.Attribute, facts: FileFacts, depth: int = 0) -> Traced:
        if expr.attr.value == "model_max_length":
            return self._tokenizer_length(expr.value, facts, depth)
        qualified = facts.qualified_name(expr) or ""
        if qualified.startswith("torch.") and qualified[6:] in _DTYPES:
            return Traced(_DTYPES[qualified[6:]])
        if qualified.startswith(_V2_STATE):
            return self._v2_state.get(qualified[len(_V2_STATE) :], _UNKNOWN)
        if isinstance(expr.value, cst.Name) and facts.qualified_name(expr.value) is None:
            return self.argument(expr.attr.value, depth)  # args.name: an argparse namespace
        if _is_library_class(qualified):
            return Traced(ImportedClass(qualified))  # transformers.GPT2Config
        return _UNKNOWN

    def _tokenizer_length(self, owner: cst.BaseExpression, facts: FileFacts, depth: int) -> Traced:
        """``tokenizer.model_max_length`` of ``AutoTokenizer.from_pretrained("<name>")``: the
        published ``model_max_length`` of the tokenizers smpfix knows."""
        built = facts.names.value(owner)
        if type(built) is cst.Name:
            file = self.file_of(facts)
            chosen = self._assignment(file, built, depth) if file is not None else None
            built = chosen if chosen is not None else built
        if (
            type(built) is not cst.Call
            or type(built.func) is not cst.Attribute
            or built.func.attr.value != "from_pretrained"
            or not built.args
            or built.args[0].keyword is not None
            or built.args[0].star
        ):
            return _UNKNOWN
        name = self.of(built.args[0].value, facts, depth + 1)
        length = tokenizer_max_length(name.value) if isinstance(name.value, str) else None
        if length is None:
            return _UNKNOWN
        return Traced(
            length, (*name.how, f"the tokenizer {name.value!r} has model_max_length {length}")
        )

    def _call(self, expr: cst.Call, facts: FileFacts, depth: int) -> Traced:
        member = facts.smp_member(expr.func)
        if member in _SIZE_SETTINGS and not expr.args:
            value = self.job.value(_SIZE_SETTINGS[member])
            setting = self.job.settings.get(_SIZE_SETTINGS[member])
            if isinstance(value, int) and not isinstance(value, bool) and setting is not None:
                return Traced(value, (f"`smp.{member}()` = {value} ({setting.source})",))
            return _UNKNOWN
        qualified = facts.qualified_name(expr.func) or dotted_name(expr.func) or ""
        if (
            qualified in _BUILTINS
            and len(expr.args) >= 2
            and not any(arg.keyword or arg.star for arg in expr.args)
        ):
            found = [self.of(arg.value, facts, depth + 1) for arg in expr.args]
            return self._apply(_BUILTINS[qualified], found)
        if qualified == "torch.get_default_dtype" and not expr.args:
            return Traced("fp32")
        if (
            qualified in ("int", "bool", "float")
            and len(expr.args) == 1
            and not expr.args[0].keyword
        ):
            inner = self.of(expr.args[0].value, facts, depth + 1)
            return self._apply({"int": int, "bool": bool, "float": float}[qualified], (inner,))
        return _UNKNOWN

    def _comparison(self, expr: cst.Comparison, facts: FileFacts, depth: int) -> Traced:
        left = self.of(expr.left, facts, depth + 1)
        how = left.how
        result = True
        for target in expr.comparisons:
            right = self.of(target.comparator, facts, depth + 1)
            function = _COMPARISONS.get(type(target.operator))
            if function is None or not left.known or not right.known:
                return _UNKNOWN
            compared = self._apply(function, (left, right))
            if not compared.known:
                return _UNKNOWN
            result = result and bool(compared.value)
            how += right.how
            left = right
        return Traced(result, how)

    @staticmethod
    def _apply(function: Callable[..., Any], values: Sequence[Traced]) -> Traced:
        if not all(value.known for value in values):
            return _UNKNOWN
        try:
            result = function(*(value.value for value in values))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            return _UNKNOWN
        return Traced(result, tuple(dict.fromkeys(part for value in values for part in value.how)))
