"""Measure what one Hugging Face transformer layer saves for its backward pass, per family.

``smpfix plan`` sizes a Hugging Face model's activations with a per-layer count for each family
(``smpfix/plan/layers.py``). This script measures those counts: it builds small models of each
family from configuration objects (random weights, nothing downloaded), runs the forward pass
in training mode under ``torch.autograd.graph.saved_tensors_hooks``, and adds up the bytes of
every storage autograd keeps for backward, each storage once (views of one storage, a tensor
two operations save, count once) and the parameters left out. One layer is the difference
between a model of two layers and a model of one, so embeddings, the final norm, the masks
the model builds once and the layer boundary cancel out.

Over a grid of hidden sizes, MLP widths, heads, sequence lengths and batch sizes it fits

    bytes per layer = hidden · s·b·h + mlp · s·b·f + scores · a·s²·b + constant

by least squares, and prints each family's coefficients (in bytes per element at the width
measured: a bf16 model gives the 16-bit count) beside the plan's, with the largest relative error
of the fit over the grid. Cases: the model held in bf16 or fp32, and fp32 weights under
``torch.autocast`` in bf16; eager attention and PyTorch's ``scaled_dot_product_attention``;
dropout at the configuration's default and off (dropout runs ``torch.native_dropout``, the
fused kernel a GPU runs, whose mask is 1 byte). ``--json PATH`` writes the table that
``tests/test_plan_layer_measurements.py`` holds ``smpfix.plan.layers`` to.

Not part of the test suite and not needed by CI: it needs ``torch`` and ``transformers``
(``pip install torch transformers``), imported only when it runs. Run from the repository,
once per transformers version (the plan uses 5.24.0 and 4.28.1; without
``scaled_dot_product_attention`` before 4.36, the sdpa case is skipped):

    python benchmarks/measure_layer_activations.py \
        --json benchmarks/layer_activations/transformers-5.24.0.json

It runs on the CPU: a GPU's kernels may save other tensors (``docs/plan.md`` says which).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# (hidden, heads, MLP width): the MLP width varies apart from the hidden size so that the fit
# can tell the two terms apart.
SHAPES = ((128, 4, 512), (128, 8, 256), (256, 4, 768), (256, 8, 1024))
SEQUENCES = (32, 64, 128)
# Batches of 2 and 4: at batch 1 GPT-NeoX's q, k and v stay views of one storage, which keeps
# 4 more bytes per s·b·h (docs/plan.md).
BATCHES = (2, 4)
FAMILIES = ("gpt2", "gptj", "gpt_neox", "llama", "t5", "flan_t5", "bert")


@dataclass(frozen=True)
class Case:
    """One way of running a family's layer."""

    family: str
    precision: str  # "bf16" (model held in bf16), "fp32", or "autocast" (fp32 weights, bf16)
    attention: str  # "eager" or "sdpa"
    dropout: str  # "default" (the configuration's), "none", or "hidden" (no attention dropout)

    @property
    def name(self) -> str:
        return f"{self.family}, {self.precision}, {self.attention}, dropout {self.dropout}"


@dataclass(frozen=True)
class Fit:
    """Coefficients in bytes per element of ``s·b·h``, ``s·b·f``, ``a·s²·b`` (and a constant in
    bytes), with the largest relative error of the fit over the grid."""

    case: Case
    hidden: float
    mlp: float
    scores: float
    constant: float
    max_error: float
    points: int


def build(
    torch: Any, family: str, hidden: int, heads: int, ffn: int, layers: int, case: Case
) -> Any:
    """A base model (no language-model head) of ``layers`` layers from a configuration object."""
    import transformers as hf

    common = {"attn_implementation": case.attention, "use_cache": False}
    hidden_p = 0.0 if case.dropout == "none" else 0.1  # where the configuration has dropout
    attention_p = 0.1 if case.dropout == "default" else 0.0
    if family == "gpt2":
        config = hf.GPT2Config(
            n_embd=hidden, n_layer=layers, n_head=heads, n_inner=ffn, n_positions=256,
            vocab_size=128, attn_pdrop=attention_p, resid_pdrop=hidden_p, embd_pdrop=hidden_p,
            **common,
        )  # fmt: skip
        model = hf.GPT2Model(config)
    elif family == "gptj":
        config = hf.GPTJConfig(
            n_embd=hidden, n_layer=layers, n_head=heads, n_inner=ffn, n_positions=256,
            vocab_size=128, rotary_dim=hidden // heads // 2, **common,
        )  # fmt: skip
        model = hf.GPTJModel(config)
    elif family == "gpt_neox":
        config = hf.GPTNeoXConfig(
            hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=ffn, max_position_embeddings=256, vocab_size=128, **common,
        )  # fmt: skip
        model = hf.GPTNeoXModel(config)
    elif family == "llama":
        config = hf.LlamaConfig(
            hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=heads, intermediate_size=ffn, max_position_embeddings=256,
            vocab_size=128, **common,
        )  # fmt: skip
        model = hf.LlamaModel(config)
    elif family in ("t5", "flan_t5"):
        config = hf.T5Config(
            d_model=hidden, d_ff=ffn, num_layers=layers, num_decoder_layers=layers,
            num_heads=heads, d_kv=hidden // heads, vocab_size=128, dropout_rate=hidden_p,
            feed_forward_proj="gated-gelu" if family == "flan_t5" else "relu", **common,
        )  # fmt: skip
        model = hf.T5Model(config)
        for module in model.modules():  # T5 has one rate: take the attention's off alone
            if type(module).__name__ == "T5Attention":
                module.dropout = attention_p
    elif family == "bert":
        config = hf.BertConfig(
            hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=ffn, vocab_size=128, max_position_embeddings=256,
            hidden_dropout_prob=hidden_p, attention_probs_dropout_prob=attention_p, **common,
        )  # fmt: skip
        model = hf.BertModel(config, add_pooling_layer=False)
    else:
        raise ValueError(family)
    if case.precision == "bf16":
        model = model.to(torch.bfloat16)
    return model.train()


_VIEWS = frozenset(
    {"TBackward0", "TransposeBackward0", "ViewBackward0", "PermuteBackward0", "ExpandBackward0"}
)


def _weight_copy(tensor: Any) -> bool:
    """A 16-bit copy autocast made of a parameter (or a view of one): a per-parameter cost,
    not an activation."""
    node = tensor.grad_fn
    for _ in range(4):
        if node is None:
            return False
        name = type(node).__name__
        if name == "ToCopyBackward0":
            return any(type(n).__name__ == "AccumulateGrad" for n, _ in node.next_functions)
        if name not in _VIEWS:
            return False
        node = node.next_functions[0][0] if node.next_functions else None
    return False


def _fused_dropout(torch: Any) -> Any:
    """``F.dropout`` as a GPU runs it: the fused kernel keeps a 1-byte mask. On the CPU PyTorch
    multiplies by a mask of the input's dtype (2 or 4 bytes); ``torch.native_dropout`` is the
    fused kernel's operation, with its CPU implementation."""

    def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
        del inplace  # nothing here writes in place: the output is a new tensor
        if not training or p == 0.0:
            return input
        return torch.native_dropout(input, p, True)[0]

    return dropout


def saved_bytes(torch: Any, model: Any, family: str, seq: int, batch: int, case: Case) -> int:
    """Bytes of the storages autograd keeps after one forward pass, each once, parameters and
    autocast's copies of them out."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def pack(tensor: Any) -> Any:
        storage = tensor.untyped_storage()
        pointer = storage.data_ptr()
        if pointer not in parameters and storage.nbytes() > 0 and not _weight_copy(tensor):
            kept[pointer] = storage.nbytes()
        return tensor

    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 128, (batch, seq), generator=generator)
    inputs = {"input_ids": ids}
    if family in ("t5", "flan_t5"):
        inputs["decoder_input_ids"] = ids  # the target as long as the source (layers.py)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=case.precision == "autocast")
    functional = torch.nn.functional
    unfused, functional.dropout = functional.dropout, _fused_dropout(torch)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), autocast:
            output = model(**inputs)
    finally:
        functional.dropout = unfused
    del output
    return sum(kept.values())


def per_layer(
    torch: Any, family: str, shape: tuple[int, int, int], seq: int, batch: int, case: Case
) -> float:
    """One layer's saved bytes: a model of two layers less a model of one (for T5, one
    encoder and one decoder layer, averaged: smpfix counts T5's depth as both stacks)."""
    hidden, heads, ffn = shape
    found = []
    for layers in (1, 2):
        torch.manual_seed(0)
        model = build(torch, family, hidden, heads, ffn, layers, case)
        found.append(saved_bytes(torch, model, family, seq, batch, case))
    one = float(found[1] - found[0])
    return one / 2 if family in ("t5", "flan_t5") else one


def fit(torch: Any, case: Case) -> Fit:
    import numpy as np

    rows, measured = [], []
    for shape, seq, batch in itertools.product(SHAPES, SEQUENCES, BATCHES):
        hidden, heads, ffn = shape
        rows.append([seq * batch * hidden, seq * batch * ffn, heads * seq * seq * batch, 1.0])
        measured.append(per_layer(torch, case.family, shape, seq, batch, case))
    matrix, target = np.array(rows, dtype=float), np.array(measured, dtype=float)
    coefficients, *_ = np.linalg.lstsq(matrix, target, rcond=None)
    predicted = matrix @ coefficients
    error = float(np.max(np.abs(predicted - target) / target))
    hidden, mlp, scores, constant = (float(c) for c in coefficients)
    return Fit(case, hidden, mlp, scores, constant, error, len(target))


def cases(families: tuple[str, ...], sdpa: bool) -> Iterator[Case]:
    """Eager attention (the scores kept) in each precision with the configuration's dropout;
    without dropout where the configuration has some; PyTorch's attention without attention
    dropout (on a GPU, flash attention keeps no scores and no attention dropout mask)."""
    with_dropout = {"gpt2", "t5", "flan_t5", "bert"}  # the others' configurations default to 0
    for family in families:
        for precision in ("bf16", "autocast", "fp32"):
            yield Case(family, precision, "eager", "default")
        if family in with_dropout:
            yield Case(family, "bf16", "eager", "none")
        if sdpa:
            yield Case(family, "bf16", "sdpa", "hidden" if family in with_dropout else "default")


def counted(family: str) -> tuple[float, float, float]:
    """smpfix's central count for the family, in the same units (16-bit bytes)."""
    from smpfix.plan.layers import LayerKind, band
    from smpfix.plan.models import ModelShape

    name = {"flan_t5": "t5"}.get(family, family)
    shape = ModelShape(name, 256, 2, 4, 128, 1024, 256, gated_ffn=family == "flan_t5")
    central = band(shape, LayerKind.HUGGING_FACE).central
    return central.replicated + central.split, central.ffn, central.scores


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", action="append", choices=FAMILIES)
    parser.add_argument("--json", type=Path, help="write the fitted table to this file")
    args = parser.parse_args(argv)
    try:
        import torch
        import transformers
    except ImportError as missing:
        print(f"{missing.name} is needed: pip install torch transformers", file=sys.stderr)
        return 2

    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    families = tuple(args.family or FAMILIES)
    major, minor = (int(part) for part in transformers.__version__.split(".")[:2])
    sdpa = (major, minor) >= (4, 36)  # the first version with attn_implementation="sdpa"
    fits = [fit(torch, case) for case in cases(families, sdpa)]
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, CPU")
    print(f"{'case':44} {'s·b·h':>7} {'s·b·f':>7} {'a·s²·b':>7} {'const':>9} {'error':>6}  plan")
    for found in fits:
        ours = counted(found.case.family)
        print(
            f"{found.case.name:44} {found.hidden:7.2f} {found.mlp:7.2f} {found.scores:7.2f}"
            f" {found.constant:9.0f} {found.max_error:6.1%}  {' / '.join(f'{c:g}' for c in ours)}"
        )
    if args.json is not None:
        table = {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "device": "cpu",
            "grid": {"shapes": SHAPES, "sequences": SEQUENCES, "batches": BATCHES},
            "fits": [{**asdict(found.case), **_rounded(found)} for found in fits],
        }
        args.json.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    return 0


def _rounded(found: Fit) -> dict[str, float]:
    return {
        "hidden": round(found.hidden, 3),
        "mlp": round(found.mlp, 3),
        "scores": round(found.scores, 3),
        "constant": round(found.constant),
        "max_error": round(found.max_error, 4),
        "points": found.points,
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
