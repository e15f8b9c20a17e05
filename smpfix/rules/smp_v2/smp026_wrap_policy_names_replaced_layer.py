"""SMP026: an FSDP auto-wrap policy naming the Hugging Face layer ``tsm.transform`` replaced."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from smpfix.job.versions import FIRST_V2
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism
from smpfix.rules.scope import FileScope, Library
from smpfix.rules.smp_v2._script import V2Calls, keyword
from smpfix.rules.titles import snippet

_POLICY = "torch.distributed.fsdp.wrap.transformer_auto_wrap_policy"
_MODULE_POLICY = "torch.distributed.fsdp.wrap.ModuleWrapPolicy"


class WrapPolicyNamesReplacedLayer(Rule):
    summary = (
        "An FSDP auto-wrap policy names a Hugging Face layer class (`LlamaDecoderLayer`) in a"
        " script whose model `tsm.transform` converted: those layers no longer exist, so FSDP"
        " wraps the whole model as one unit."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE
    library = Library.V2
    scope = FileScope.SMP_V2
    since = FIRST_V2

    def leave_Module(self, node: cst.Module) -> None:
        calls = self.program.file.answer(V2Calls)
        if not calls.transforms or not any(keyword(w, "auto_wrap_policy") for w in calls.fsdp):
            return
        for layer in self._named_layers():
            name = self.program.code_for(layer)
            self.report(
                layer,
                f"auto-wrap policy names {snippet(name)}, which `tsm.transform` replaces",
                explanation=(
                    "`tsm.transform` in this script replaces the Hugging Face layers with SMP v2's"
                    " own (`torch.sagemaker.tensor_parallel.transformer.TransformerLayer`): no"
                    f" module of the transformed model is a `{name}`, so FSDP wraps the whole"
                    " model as one unit, gathers every parameter at once, and the memory sharding"
                    " was to save is spent (out of memory, or a much slower job). Name SMP's"
                    " `TransformerLayer` in the policy for the transformed model."
                ),
            )

    def _named_layers(self) -> Iterator[cst.CSTNode]:
        """Hugging Face classes named in the file's transformer or module wrap policies."""
        facts = self.program.facts
        for call in facts.call_order:
            qualified = facts.qualified_name(call.func)
            if qualified == "functools.partial" and call.args:
                if facts.qualified_name(call.args[0].value) != _POLICY:
                    continue
                classes = keyword(call, "transformer_layer_cls")
            elif qualified == _POLICY:
                classes = keyword(call, "transformer_layer_cls")
            elif qualified == _MODULE_POLICY and call.args:
                classes = call.args[0]
            else:
                continue
            if classes is None:
                continue
            value = classes.value
            elements = (
                [element.value for element in value.elements]
                if isinstance(value, (cst.Set, cst.List, cst.Tuple))
                else [value]
            )
            for element in elements:
                found = facts.qualified_name(element) or ""
                if found.startswith("transformers."):
                    yield element
