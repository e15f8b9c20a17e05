"""Which Hugging Face model family a script trains, and that family's transformer layer.

An FSDP wrap shards best one transformer layer at a time, and activation checkpointing
recomputes whole layers: both name the family's layer class. The family is read from the
classes the script builds the model with (``GPT2LMHeadModel``, ``LlamaConfig``), else from the
checkpoint name it loads (``from_pretrained("EleutherAI/gpt-j-6b")``), else from the default
of a ``--model_name`` option, which a run may override (the wrap says so in a ``TODO``): never
guessed when two families appear.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

import libcst as cst

from smpfix.base.literals import literal_value
from smpfix.program.model import Program


@dataclass(frozen=True)
class Family:
    name: str
    layer: str
    module: str
    # SMP v2 implements tensor parallelism for it (``tsm.transform``; the tensor-parallelism
    # page's list of supported Hugging Face models).
    tensor_parallel: bool = False
    # Where the script shows it, when only the default of a command-line option does (the
    # run may name another model): the option's default, for the item; "" otherwise.
    option_default: str = ""


def _family(name: str, layer: str, package: str, tensor_parallel: bool = False) -> Family:
    return Family(name, layer, f"transformers.models.{package}.modeling_{package}", tensor_parallel)


# Longest prefix first: ``GPTNeoX`` before ``GPTNeo``, ``Roberta`` before nothing else.
_BY_CLASS_PREFIX: tuple[tuple[str, Family], ...] = (
    ("GPTNeoX", _family("GPT-NeoX", "GPTNeoXLayer", "gpt_neox", tensor_parallel=True)),
    ("GPTNeo", _family("GPT-Neo", "GPTNeoBlock", "gpt_neo")),
    ("GPTJ", _family("GPT-J", "GPTJBlock", "gptj")),
    ("GPT2", _family("GPT-2", "GPT2Block", "gpt2")),
    ("Llama", _family("Llama", "LlamaDecoderLayer", "llama", tensor_parallel=True)),
    ("Mixtral", _family("Mixtral", "MixtralDecoderLayer", "mixtral", tensor_parallel=True)),
    ("Mistral", _family("Mistral", "MistralDecoderLayer", "mistral", tensor_parallel=True)),
    ("Roberta", _family("RoBERTa", "RobertaLayer", "roberta")),
    ("Bert", _family("BERT", "BertLayer", "bert")),
    ("T5", _family("T5", "T5Block", "t5")),
    ("OPT", _family("OPT", "OPTDecoderLayer", "opt")),
    ("Bloom", _family("BLOOM", "BloomBlock", "bloom")),
    ("Falcon", _family("Falcon", "FalconDecoderLayer", "falcon")),
    ("ViT", _family("ViT", "ViTLayer", "vit")),
)
_BY_PREFIX = dict(_BY_CLASS_PREFIX)

# Checkpoint names (``org/name``, lower case) of each family.
_BY_CHECKPOINT: tuple[tuple[str, str], ...] = (
    (r"gpt-?neox|pythia", "GPTNeoX"),
    (r"gpt-?neo\b|gpt-neo-", "GPTNeo"),
    (r"gpt-?j", "GPTJ"),
    (r"(^|/)(distil)?gpt2", "GPT2"),
    (r"llama", "Llama"),
    (r"mixtral", "Mixtral"),
    (r"mistral", "Mistral"),
    (r"roberta", "Roberta"),
    (r"(^|/)bert-|(^|/)bert$", "Bert"),
    (r"(^|/)(flan-)?t5", "T5"),
    (r"(^|/)opt-", "OPT"),
    (r"bloom", "Bloom"),
    (r"falcon", "Falcon"),
    (r"(^|/)vit-", "ViT"),
)


# Classes of a family that build no model: a GPT-2 tokenizer serves models of other families.
_NOT_MODELS = ("Tokenizer", "Processor", "FeatureExtractor", "ImageProcessor")


def model_family(program: Program) -> Optional[Family]:
    """The one family the script's model classes or checkpoint names show, else None."""
    found = _from_classes(program) or _from_checkpoints(program)
    if len(found) == 1:
        return found.pop()
    defaults = _from_option_defaults(program)
    if len(defaults) == 1:
        family, default = defaults.popitem()
        return replace(family, option_default=default)
    return None


def _from_classes(program: Program) -> set[Family]:
    imports = program.facts.imports
    found: set[Family] = set()
    for qualified in imports.bindings.values():
        if not qualified.startswith("transformers."):
            continue
        name = qualified.rsplit(".", 1)[-1]
        if any(part in name for part in _NOT_MODELS):
            continue
        family = _of_class(name)
        if family is not None:
            found.add(family)
    return found


def _of_class(name: str) -> Optional[Family]:
    for prefix, family in _BY_CLASS_PREFIX:
        if name.startswith(prefix) and (
            len(name) == len(prefix) or name[len(prefix)].isupper() or name[len(prefix)] == "_"
        ):
            return family
    return None


def _from_checkpoints(program: Program) -> set[Family]:
    """The families of the checkpoint names written in ``from_pretrained(...)`` calls."""
    found: set[Family] = set()
    for call in program.file.nodes_of(cst.Call):
        assert isinstance(call, cst.Call)
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "from_pretrained" and call.args:
            found |= _of_checkpoint(literal_value(call.args[0].value))
    return found


def _from_option_defaults(program: Program) -> dict[Family, str]:
    """The families of the defaults of ``--model...`` options, with the default."""
    found: dict[Family, str] = {}
    for call in program.file.nodes_of(cst.Call):
        assert isinstance(call, cst.Call)
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "add_argument"):
            continue
        options = [literal_value(arg.value) for arg in call.args if arg.keyword is None]
        if not any(isinstance(o, str) and "model" in o for o in options):
            continue
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "default":
                default = literal_value(arg.value)
                for family in _of_checkpoint(default):
                    found[family] = str(default)
    return found


def _of_checkpoint(value: object) -> set[Family]:
    if not isinstance(value, str):
        return set()
    name = value.lower()
    return {_BY_PREFIX[prefix] for pattern, prefix in _BY_CHECKPOINT if re.search(pattern, name)}
