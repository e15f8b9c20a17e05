"""SMP024: ``tsm.transform`` on a model family SMP v2's tensor parallelism does not support."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.job.versions import FIRST_V2
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism
from smpfix.rules.scope import FileScope, Library
from smpfix.rules.smp_v2._script import V2Calls, first_argument
from smpfix.rules.titles import snippet

# Model families by how Hugging Face names them: the class prefix (``GPT2LMHeadModel``,
# ``GPT2Config``) and the Hub ids of their checkpoints.
_UNSUPPORTED: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("GPT2", ("gpt2", "openai-community/gpt2", "distilgpt2"), "GPT-2"),
    ("GPTJ", ("EleutherAI/gpt-j",), "GPT-J"),
    ("Bert", ("bert-", "google-bert/"), "BERT"),
    ("Roberta", ("roberta-", "FacebookAI/roberta"), "RoBERTa"),
    ("T5", ("t5-", "google-t5/", "google/flan-t5"), "T5"),
    ("Bloom", ("bigscience/bloom",), "BLOOM"),
    ("OPT", ("facebook/opt-",), "OPT"),
    ("Falcon", ("tiiuae/falcon",), "Falcon"),
)
_FACTORIES = frozenset({"from_pretrained", "from_config"})


class TransformUnsupportedModel(Rule):
    summary = (
        "`torch.sagemaker.transform` on a Hugging Face model family SMP v2's tensor parallelism"
        " does not support (it supports GPT-NeoX, Llama 2 and 3, Mistral and Mixtral; GPT-2,"
        " GPT-J, BERT and RoBERTa were SMP v1's)."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE
    library = Library.V2
    scope = FileScope.SMP_V2
    since = FIRST_V2

    def leave_Module(self, node: cst.Module) -> None:
        for call in self.program.file.answer(V2Calls).transforms:
            argument = first_argument(call)
            family = self._family(argument, call) if argument is not None else None
            if family is None:
                continue
            self.report(
                call,
                f"{snippet(self.program.code_for(call.func), 30)} has no SMP v2 policy for"
                f" {family} models: the job fails or is not split",
                explanation=(
                    "`tsm.transform` converts only the Hugging Face models SMP v2's tensor"
                    " parallelism supports (GPT-NeoX, Llama 2, Llama 3 and 3.1, Mistral 7B,"
                    f" Mixtral), and this model is {family}, which SMP v2 has no policy for (SMP"
                    " v1 covered GPT-2, GPT-J, BERT and RoBERTa; v2 does not). The job fails at"
                    " the transform, or trains without the parallelism it was sized for. Use a"
                    " supported model family, or leave out `tsm.transform` and tensor parallelism"
                    " (`tensor_parallel_degree` 1) and shard the model with FSDP alone."
                ),
            )

    def _family(
        self, expression: cst.BaseExpression, at: cst.CSTNode, depth: int = 3
    ) -> Optional[str]:
        """The unsupported family ``expression`` builds: a model class, a factory's checkpoint
        id or config class, through the names that hold them (``depth`` of them at most)."""
        if depth == 0:
            return None
        if type(expression) is cst.Name:
            reaching = self.program.names.reaching(expression.value, at).assignments
            values = [assignment.value for assignment in reaching]
            found = {self._family(value, value, depth - 1) for value in values}
            return found.pop() if len(found) == 1 and values else None
        if type(expression) is not cst.Call:
            return None
        facts = self.program.facts
        qualified = facts.qualified_name(expression.func) or ""
        if qualified.startswith("transformers."):
            name = qualified.rsplit(".", 1)[-1]
            if name in _FACTORIES:
                name = qualified.rsplit(".", 2)[-2]
            by_class = _by_class(name)
            if by_class is not None:
                return by_class
            if qualified.rsplit(".", 1)[-1] in _FACTORIES and expression.args:
                first = expression.args[0].value
                checkpoint = facts.literal(first)
                if isinstance(checkpoint, str):
                    return _by_checkpoint(checkpoint)
                return self._family(first, at, depth - 1)
        return None


def _by_class(name: str) -> Optional[str]:
    for prefix, _, family in _UNSUPPORTED:
        if name.startswith(prefix) and not name.startswith("GPTNeoX"):
            return family
    return None


def _by_checkpoint(checkpoint: str) -> Optional[str]:
    for _, ids, family in _UNSUPPORTED:
        if any(checkpoint == id_ or checkpoint.startswith(id_) for id_ in ids):
            return family
    return None
