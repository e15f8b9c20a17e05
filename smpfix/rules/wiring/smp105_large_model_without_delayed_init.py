"""SMP105: a model evidently above ~10B parameters built without delayed parameter
initialisation."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.findings import Severity
from smpfix.base.walker import Ancestry
from smpfix.job.jobfacts import Tri
from smpfix.program.model import Program
from smpfix.program.objects.creation_contexts import CreationContext, contexts_of
from smpfix.program.objects.hf_models import (
    checkpoint_name,
    class_name,
    config_checkpoint_name,
    is_config_class,
    pretrained_model_call,
)
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism
from smpfix.rules.titles import snippet

THRESHOLD = 10e9
PROCESSES_PER_HOST = 8
_HIDDEN = ("n_embd", "hidden_size", "d_model")
_LAYERS = ("n_layer", "num_hidden_layers", "num_layers")
_VOCAB = ("vocab_size",)
# Checkpoints whose names do not carry their size; the rest are read from "-20b", "-7b1", "8x7b".
KNOWN_CHECKPOINTS = {"bloom": 176e9, "bloomz": 176e9}
_SIZE_TOKEN = re.compile(r"(?:(\d+)x)?(\d+(?:\.\d+)?)b(\d*)")


def checkpoint_size(name: str) -> Optional[float]:
    """Parameters a Hugging Face checkpoint name announces (``EleutherAI/gpt-neox-20b`` -> 20e9)."""
    last = name.rstrip("/").rsplit("/", 1)[-1].lower()
    if last in KNOWN_CHECKPOINTS:
        return KNOWN_CHECKPOINTS[last]
    for token in re.split(r"[-_]", last):
        match = _SIZE_TOKEN.fullmatch(token)
        if match:
            experts, whole, fraction = match.groups()
            size = float(whole) + (float(f"0.{fraction}") if fraction else 0.0)
            return size * (int(experts) if experts else 1) * 1e9
    return None


def estimate(hidden: int, layers: int, vocab: int) -> float:
    """Transformer parameters: 12 per layer per hidden squared, plus the embedding table."""
    return 12.0 * layers * hidden * hidden + vocab * hidden


@dataclass(frozen=True)
class _Size:
    parameters: float
    how: str


@dataclass(frozen=True)
class _ModelConstruction:
    call: cst.Call
    size: _Size
    function: Optional[str]
    contexts: tuple[CreationContext, ...]


class LargeModelWithoutDelayedInit(Rule):
    summary = (
        "A model above ~10B parameters should be built inside `smp.delay_param_initialization()` to"
        " avoid running out of host memory."
    )
    fix_availability = FixAvailability.NONE
    default_severity = Severity.HINT
    depends_on = ("DELAYED_INIT",)
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self._candidates: list[_ModelConstruction] = []
        self._called_in: dict[str, list[tuple[CreationContext, ...]]] = {}
        self._open: list[tuple[CreationContext, ...]] = []

    def visit_With(self, node: cst.With) -> None:
        self._open.append(tuple(contexts_of(self.program.facts, node)))

    def leave_With(self, node: cst.With) -> None:
        self._open.pop()

    def visit_Call(self, node: cst.Call) -> None:
        # The `with` items count as surrounding their own calls too; they build no model.
        contexts = tuple(c for opened in self._open for c in opened)
        if type(node.func) is cst.Name and contexts:
            self._called_in.setdefault(node.func.value, []).append(contexts)
        size = self._model_size(node)
        if size is not None and size.parameters >= THRESHOLD:
            function = self.ancestry.nearest(cst.FunctionDef)
            name = function.name.value if type(function) is cst.FunctionDef else None
            self._candidates.append(_ModelConstruction(node, size, name, contexts))

    # -- how big -----------------------------------------------------------------------------
    def _model_size(self, call: cst.Call) -> Optional[_Size]:
        func = call.func
        if (
            type(func) is cst.Attribute
            and func.attr.value == "from_pretrained"
            and pretrained_model_call(self.program.facts, call) is call
        ):
            name = checkpoint_name(self.program.facts, call)
            size = checkpoint_size(name) if name else None
            if size is not None:
                return _Size(size, f'the checkpoint "{name}"')
        config = argument(call, "config", 0)
        if config is None or not self._builds_model(call):
            return None
        return self._config_size(config.value)

    def _builds_model(self, call: cst.Call) -> bool:
        """``Model.from_config(cfg)``, ``GPT2LMHeadModel(cfg)``, a local ``GPT(cfg)``; not configs
        or helpers."""
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "from_config":
            return True
        name = class_name(self.program.facts, func)
        if (
            name is None
            or not name[:1].isupper()
            or name.endswith(("Config", "Tokenizer", "TokenizerFast", "Processor"))
        ):
            return False
        return self.program.facts.smp_member(func) is None

    def _config_size(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[_Size]:
        if type(expr) is cst.Name and depth == 0:
            assignment = self.program.facts.names.assignment(expr.value, expr)
            return (
                self._config_size(assignment.value, depth + 1) if assignment is not None else None
            )
        if type(expr) is not cst.Call:
            return None
        literal = self._literal_sizes(expr)
        if literal is not None:
            return literal
        name = config_checkpoint_name(self.program.facts, expr)
        size = checkpoint_size(name) if name else None
        return _Size(size, f'the configuration of "{name}"') if size is not None and name else None

    def _literal_sizes(self, call: cst.Call) -> Optional[_Size]:
        is_config = (
            is_config_class(self.program.facts, call.func)
            or config_checkpoint_name(self.program.facts, call) is not None
        )
        if not is_config:
            return None
        found: dict[str, int] = {}
        for arg in call.args:
            if arg.keyword is None:
                continue
            value = self.program.facts.literal(arg.value)
            if isinstance(value, int) and not isinstance(value, bool):
                found[arg.keyword.value] = value
        hidden = next((found[k] for k in _HIDDEN if k in found), None)
        layers = next((found[k] for k in _LAYERS if k in found), None)
        if hidden is None or layers is None:
            return None
        vocab = next((found[k] for k in _VOCAB if k in found), 0)
        return _Size(
            estimate(hidden, layers, vocab),
            f"{layers} layers of hidden size {hidden}" + (f", vocabulary {vocab}" if vocab else ""),
        )

    # -- where it is built -------------------------------------------------------------------
    def leave_Module(self, node: cst.Module) -> None:
        delayed = self.feature("DELAYED_INIT")
        for candidate in self._candidates:
            surroundings = [candidate.contexts]
            if candidate.function is not None:
                # One level: a builder function called inside a delayed-initialisation context.
                surroundings.extend(self._called_in.get(candidate.function, []))
            if any(self._delays(contexts, delayed.state) for contexts in surroundings):
                continue
            in_model_creation = any(
                c.delayed_from_config for contexts in surroundings for c in contexts
            )
            self._flag(candidate, in_model_creation)

    @staticmethod
    def _delays(contexts: tuple[CreationContext, ...], setting: Tri) -> bool:
        return any(
            c.delayed_init is not Tri.OFF or (c.delayed_from_config and setting is Tri.ON)
            for c in contexts
        )

    def _flag(self, candidate: _ModelConstruction, in_model_creation: bool) -> None:
        delayed = self.feature("DELAYED_INIT")
        billions = candidate.size.parameters / 1e9
        shown = self.program.code_for(candidate.call.func)
        host_gb = 4 * candidate.size.parameters * PROCESSES_PER_HOST / 1e9
        cost = (
            f"every process allocates and initialises all of its ~{billions:.0f}B parameters in"
            f" host memory before `smp.DistributedModel` partitions them (about {host_gb:,.0f} GB"
            f" in fp32 for {PROCESSES_PER_HOST} processes on a host), which can run out of memory"
        )
        built = f"{snippet(shown + '(...)', 30)} builds ~{billions:.0f}B parameters"
        evidence = (f"about {billions:.0f}B parameters: {candidate.size.how}",)
        if in_model_creation:
            title = f"{built} with delayed init off"
            setting = (
                delayed.condition() if delayed.state is Tri.OFF else "smpfix cannot see it set"
            )
            lead = (
                f"`{shown}(...)` builds a model of about {billions:.0f}B parameters"
                f" ({candidate.size.how}) inside `smp.model_creation(...)`, which delays"
                " initialisation only when `delayed_parameter_initialization` is on, and"
                f" {setting}: {cost}."
            )
            advice = (
                "Set `delayed_parameter_initialization: True` in the job, or build it inside"
                " `smp.delay_param_initialization(enabled=True)`."
            )
        elif pretrained_model_call(self.program.facts, candidate.call) is candidate.call:
            title = f"{built} with weights on every process"
            lead = (
                f"`{shown}(...)` builds a model of about {billions:.0f}B parameters"
                f" ({candidate.size.how}) and its weights outside"
                f" `smp.delay_param_initialization()`: {cost}."
            )
            advice = (
                "Build it with `from_config(...)` inside `with"
                " smp.delay_param_initialization(enabled=True):`, which defers allocation until the"
                " model moves to the GPUs, and load the weights into the wrapped model"
                " (`model.load_state_dict(...)` after the wrap, or"
                " `smp.resume_from_checkpoint(path, partial=False)` from SMP 1.10)."
            )
        else:
            title = f"{built} without delayed parameter init"
            lead = (
                f"`{shown}(...)` builds a model of about {billions:.0f}B parameters"
                f" ({candidate.size.how}) outside `smp.delay_param_initialization()`: {cost}."
            )
            advice = (
                "Build it inside `with smp.delay_param_initialization(enabled=True):` (or"
                " `smp.model_creation(...)` with `delayed_parameter_initialization` on), which"
                " defers allocation until the model moves to the GPUs."
            )
        self.report(
            candidate.call,
            title,
            explanation=f"{lead} {advice}",
            evidence=evidence,
            severity=Severity.HINT,
            job_facts=(delayed,),
        )
