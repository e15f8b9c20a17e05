"""The model ``smpfix plan --model`` is asked about: a known name, a ``config.json``, or a shape.

- **A Hugging Face name** (``EleutherAI/gpt-neox-20b``, ``meta-llama/Llama-2-70b-hf``): the
  table of published configurations shipped with smpfix (``checkpoints``). Nothing is
  downloaded: a name that is not in the table is refused with the names that are.
- **A ``config.json``** (a checkpoint directory or the file): read as JSON, never executed; its
  ``model_type`` names the configuration class (``hf_configs``) whose keywords and defaults
  give the shape.
- **A shape** (``--layers --hidden --heads --vocab``): a GPT-2-style decoder (learned
  positions, a 4h MLP, tied embeddings), the architecture of the seeds' reference models.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Optional

from smpfix.plan.checkpoints import CHECKPOINTS, find_checkpoint
from smpfix.plan.hf_configs import shape_from_config
from smpfix.plan.models import ModelShape, count_parameters
from smpfix.plan.what_fits import ChosenModel

# ``model_type`` in a config.json, to the configuration class that reads it.
_CONFIG_CLASSES = {
    "gpt2": "GPT2Config",
    "gpt_neox": "GPTNeoXConfig",
    "gptj": "GPTJConfig",
    "llama": "LlamaConfig",
    "mistral": "LlamaConfig",
    "mixtral": "MixtralConfig",
    "opt": "OPTConfig",
    "bloom": "BloomConfig",
    "falcon": "FalconConfig",
    "RefinedWebModel": "FalconConfig",
    "RefinedWeb": "FalconConfig",
    "t5": "T5Config",
    "bert": "BertConfig",
    "roberta": "RobertaConfig",
}
_MAX_CONFIG_BYTES = 1 << 20


class ModelNotFound(ValueError):
    """The model cannot be read: the message says why and what would work."""


@dataclass(frozen=True)
class Dimensions:
    """``--layers --hidden --heads --vocab`` (and ``--seq`` as the positions)."""

    layers: Optional[int] = None
    hidden: Optional[int] = None
    heads: Optional[int] = None
    vocab: Optional[int] = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.layers, self.hidden, self.heads, self.vocab))


def choose(name_or_file: Optional[str], dimensions: Dimensions) -> ChosenModel:
    """The model of ``--model`` or of the dimensions (exactly one of them)."""
    if name_or_file and dimensions.given:
        raise ModelNotFound("give --model or --layers/--hidden/--heads/--vocab, not both")
    if dimensions.given:
        return _of_dimensions(dimensions)
    if not name_or_file:
        raise ModelNotFound("give --model NAME_OR_FILE, or --layers, --hidden, --heads and --vocab")
    if os.path.isdir(name_or_file) or name_or_file.endswith(".json"):
        return _of_config_file(name_or_file)
    found = find_checkpoint(name_or_file)
    if found is None:
        known = ", ".join(sorted(CHECKPOINTS))
        raise ModelNotFound(
            f"{name_or_file!r} is not a model smpfix knows the configuration of; pass its"
            f" config.json, or its shape with --layers --hidden --heads --vocab. Known: {known}"
        )
    return ChosenModel(
        count_parameters(found.shape), found.shape, f"the published configuration of {name_or_file}"
    )


def _of_dimensions(dimensions: Dimensions) -> ChosenModel:
    values = (dimensions.layers, dimensions.hidden, dimensions.heads, dimensions.vocab)
    if any(v is None or v < 1 for v in values):
        raise ModelNotFound("a shape needs all of --layers, --hidden, --heads and --vocab (>= 1)")
    layers, hidden, heads, vocab = (int(v) for v in values if v is not None)
    if hidden % heads:
        raise ModelNotFound(f"--hidden {hidden} is not divisible by --heads {heads}")
    shape = ModelShape("gpt2", hidden, layers, heads, vocab, 4 * hidden, 0)
    return ChosenModel(
        count_parameters(shape),
        shape,
        f"a GPT-2-style decoder of {layers} layers, hidden {hidden}, {heads} heads, vocabulary"
        f" {vocab}",
    )


def _of_config_file(path: str) -> ChosenModel:
    file = os.path.join(path, "config.json") if os.path.isdir(path) else path
    try:
        if os.path.getsize(file) > _MAX_CONFIG_BYTES:
            raise ModelNotFound(f"{file}: larger than a configuration file")
        with open(file, encoding="utf-8") as handle:
            config: Any = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as problem:
        raise ModelNotFound(f"{file}: cannot be read as JSON ({problem})") from problem
    if not isinstance(config, dict):
        raise ModelNotFound(f"{file}: not a JSON object")
    model_type = config.get("model_type")
    class_name = _CONFIG_CLASSES.get(str(model_type))
    if class_name is None:
        raise ModelNotFound(
            f"{file}: model_type {model_type!r} is not one smpfix can size"
            f" ({', '.join(sorted(_CONFIG_CLASSES))})"
        )
    shape = shape_from_config(class_name, config)
    if shape is None:
        raise ModelNotFound(f"{file}: a size in it is missing or not a positive integer")
    return ChosenModel(count_parameters(shape), shape, f"{file} ({class_name})")
