"""Recognising Hugging Face model construction: which ``from_pretrained`` loads weights.

``AutoModelForCausalLM.from_pretrained("gpt2")`` builds a model *and loads its weights*;
``AutoConfig.from_pretrained("gpt2")`` and ``AutoTokenizer.from_pretrained("gpt2")`` load
no model weights at all. Rules about loading weights and about model size need to tell
them apart, by the class the method is called on (the file may import it under any name,
so the class is named through the imports when it can be, else as written).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.imports import dotted_name
from smpfix.program.facts import FileFacts

# Classes with a `from_pretrained` that loads something other than model weights.
_NOT_MODELS = (
    "Config",
    "Tokenizer",
    "TokenizerFast",
    "Processor",
    "FeatureExtractor",
    "ImageProcessor",
)


def class_name(facts: FileFacts, expr: cst.BaseExpression) -> Optional[str]:
    """The last component of the class ``expr`` names (``GPT2Config`` for
    ``transformers.GPT2Config``)."""
    name = facts.qualified_name(expr) or dotted_name(expr)
    return name.rsplit(".", 1)[-1] if name else None


def is_config_class(facts: FileFacts, expr: cst.BaseExpression) -> bool:
    name = class_name(facts, expr)
    return name is not None and name.endswith("Config")


def pretrained_model_call(facts: FileFacts, expr: cst.BaseExpression) -> Optional[cst.Call]:
    """The ``X.from_pretrained(...)`` call that builds ``expr``'s model with its weights.

    Follows a method chain (``Model.from_pretrained(name).to(device)``); None for configs,
    tokenizers and processors, and for anything that is not such a chain.
    """
    current: cst.BaseExpression = expr
    while type(current) is cst.Call and type(current.func) is cst.Attribute:
        if current.func.attr.value == "from_pretrained":
            name = class_name(facts, current.func.value)
            if name is None or name.endswith(_NOT_MODELS):
                return None
            return current
        current = current.func.value
    return None


def checkpoint_name(facts: FileFacts, call: cst.Call) -> Optional[str]:
    """The literal checkpoint name given to ``from_pretrained`` (``"EleutherAI/gpt-neox-20b"``)."""
    found = argument(call, "pretrained_model_name_or_path", 0)
    if found is None:
        return None
    value = facts.literal(found.value)
    return value if isinstance(value, str) else None


def config_checkpoint_name(facts: FileFacts, expr: cst.BaseExpression) -> Optional[str]:
    """For ``AutoConfig.from_pretrained("name")``: the name; None for anything else."""
    if (
        type(expr) is cst.Call
        and type(expr.func) is cst.Attribute
        and expr.func.attr.value == "from_pretrained"
        and is_config_class(facts, expr.func.value)
    ):
        return checkpoint_name(facts, expr)
    return None


# The Hugging Face models the library's tensor parallelism replaces whole, with their configs
# (1.12.1 ``nn/predefined_hooks.py``: each maps to ``DistributedTransformerLMHead``, matched by
# exact type). Their own ``forward`` never runs: the forward hook passes on the inputs alone
# and the return hook sets ``past_key_values``, ``hidden_states`` and ``attentions`` to None,
# so the config's output switches are never read. BERT and RoBERTa have only their encoder
# replaced and ``GPT2Model`` only its blocks: their Hugging Face ``forward`` still reads the
# switches and passes them on; T5 and ViT are not replaced in 1.12.1.
_REPLACED_WHOLE = {
    "GPT2LMHeadModel": "GPT2Config",
    "GPTJForCausalLM": "GPTJConfig",
    "GPTNeoForCausalLM": "GPTNeoConfig",
    "GPTNeoXForCausalLM": "GPTNeoXConfig",
}
_BUILDERS = ("from_config", "_from_config", "from_pretrained")


def replaced_whole(
    facts: FileFacts, call: cst.Call, config: Optional[cst.BaseExpression]
) -> Optional[str]:
    """The Hugging Face class ``call`` builds when tensor parallelism replaces that class
    whole (``GPTJForCausalLM(config)``, ``GPT2LMHeadModel.from_pretrained(...)``, or
    ``AutoModelForCausalLM.from_config(config)`` with ``config`` a call of the matching
    config class); None for anything else, a subclass of one of them included."""
    func = call.func
    if type(func) is cst.Attribute and func.attr.value in _BUILDERS:
        func = func.value
    qualified = facts.qualified_name(func) or ""
    if not qualified.startswith("transformers."):
        return None
    name = qualified.rsplit(".", 1)[-1]
    if name in _REPLACED_WHOLE:
        return name
    if name != "AutoModelForCausalLM" or type(config) is not cst.Call:
        return None
    config_name = facts.qualified_name(config.func) or ""
    if not config_name.startswith("transformers."):
        return None
    built = config_name.rsplit(".", 1)[-1]
    return next((model for model, cls in _REPLACED_WHOLE.items() if cls == built), None)
