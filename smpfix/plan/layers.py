"""What one transformer layer saves for its backward pass, per kind of layer, with its band.

Korthikanti et al. (2022) count the tensors Megatron's layer keeps: ``s·b·h·(34 + 5·a·s/h)``
bytes in 16 bits with 1-byte dropout masks, which is what SMP v1's distributed transformer
keeps (it is built the same way). A Hugging Face layer is another implementation and keeps
other tensors: GPT-2's and GPT-J's ``gelu_new`` is written out in Python and keeps four
intermediates where a fused GELU keeps one, GPT-J computes attention scores in fp32, Llama's and
T5's RMS norms keep an fp32 copy of their input, GPT-NeoX keeps an fp32 softmax, GPT-NeoX and
Llama have no dropout masks at all. Each family's coefficients here were measured by
``benchmarks/measure_layer_activations.py``: small layers built from configuration objects,
the bytes of the storages autograd keeps added up, a least-squares fit over a grid of shapes
(``benchmarks/layer_activations/``, one table per transformers version; ``docs/plan.md``).

Every count is a sum ``replicated·s·b·h + (split·s·b·h + ffn·s·b·f + scores·a·s²·b) / t`` in
bytes, so it holds at any shape; the "factor relative to Korthikanti" a family comes to
depends on ``f/h`` and ``a·s/h`` and is printed per shape by ``factor``. Each count has a band:

- the central count is the layer of transformers 5.24.0 held in 16 bits (SMP v1's
  ``fp16``/``bf16``, FSDP's ``MixedPrecision``) with eager attention and the configuration's
  dropout;
- the low end is the lesser of that and transformers 4.28.1's layer (SMP v1's era), less the
  fit's error (``MEASURED_ERROR``);
- the high end is the greatest of both versions and of fp32 weights under ``torch.autocast``
  (norms and softmax then keep fp32 tensors), plus ``GPU_MARGIN`` for what a GPU keeps that the
  CPU run does not show (CUDA autocast runs more operations in fp32).

Under flash attention the scores term goes and the hidden coefficient is the one measured with
PyTorch's ``scaled_dot_product_attention`` on its flash kernel (which keeps q, k, v, the output
and the softmax's row statistics), when the family was measured so.

For Korthikanti's formula the band is -5 %/+10 %: the formula leaves out small tensors (norm
statistics, rotary tables, the softmax's row sums), and the library's kernels may keep an fp32
softmax. Families without a measurement of their own (OPT, BLOOM, Falcon, a project's own
layers) get Korthikanti's formula with the widest band the measured families span (up to
twice the formula).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from smpfix.plan.models import ModelShape


@dataclass(frozen=True)
class LayerTensors:
    """The bytes one layer keeps for backward, as coefficients of the terms above (16 bits)."""

    replicated: float  # × s·b·h on every tensor-parallel rank
    split: float  # × s·b·h, divided by the tensor-parallel degree
    ffn: float  # × s·b·f, divided by the tensor-parallel degree
    scores: float  # × a·s²·b, divided by the tensor-parallel degree; 0 with flash attention
    # × s·b·h on every rank under flash attention, where it differs from ``replicated``
    flash_replicated: Optional[float] = None

    def bytes(self, shape: ModelShape, seq: int, samples: float, tp: int, flash: bool) -> float:
        s, b, h = seq, samples, shape.hidden
        split = self.split * s * b * h + self.ffn * s * b * shape.ffn
        scores = 0.0 if flash else self.scores * shape.heads * s * s * b
        replicated = self.replicated
        if flash and self.flash_replicated is not None:
            replicated = self.flash_replicated
        return replicated * s * b * h + (split + scores) / tp

    def scaled(self, by: float) -> LayerTensors:
        flash = None if self.flash_replicated is None else self.flash_replicated * by
        return LayerTensors(
            self.replicated * by, self.split * by, self.ffn * by, self.scores * by, flash
        )


class LayerKind(str, enum.Enum):
    """Whose layers the model runs: the library's (SMP v1's distributed transformer, SMP v2's
    transformed layers) or the Hugging Face implementation as ``from_pretrained`` builds it."""

    LIBRARY = "library"
    HUGGING_FACE = "hugging face"


@dataclass(frozen=True)
class LayerBand:
    low: LayerTensors
    central: LayerTensors
    high: LayerTensors
    source: str  # where the count comes from, in a few words


def korthikanti(shape: ModelShape) -> LayerTensors:
    """Korthikanti et al., tensor parallelism without sequence parallelism: attention and MLP
    inputs, two dropout masks and two norm inputs on every rank (``10·sbh``); Q, K, V and the
    attention output projection's input split (``8·sbh``); the MLP's activation input and
    output (``4·sbf``, ``8·sbf`` for a gated MLP's three); softmax output, dropout mask and
    dropout output of the scores (``5·as²b``)."""
    return LayerTensors(10, 8, 8 if shape.gated_ffn else 4, 5)


@dataclass(frozen=True)
class Measured:
    """One Hugging Face family's layer as ``benchmarks/measure_layer_activations.py`` measured
    it (torch 2.13.0 on the CPU, dropout masks kept in 1 byte as the GPU's fused kernel keeps
    them): (s·b·h, s·b·f, a·s²·b) coefficients in bytes, rounded to a tenth; the tables in
    ``benchmarks/layer_activations/`` hold the fits and ``tests/test_plan_layer_measurements.py``
    holds these numbers to them."""

    current: tuple[float, float, float]  # transformers 5.24.0, held in bf16, eager attention
    v4_28: tuple[float, float, float]  # transformers 4.28.1 (SMP v1's era), the same
    autocast: tuple[float, float, float]  # fp32 weights under autocast, the larger version
    flash_hidden: Optional[float]  # s·b·h under sdpa's flash kernel (5.24.0); None: unmeasured


# Measured with each configuration's default dropout: GPT-2, BERT and T5 have dropout (0.1),
# GPT-J, GPT-NeoX and Llama none. T5's rows are per layer with encoder and decoder averaged
# (a decoder layer has a second, cross-attention block; the source as long as the target).
# T5 gives its position bias to sdpa as a mask, which the CPU's flash kernel does not take:
# its flash count is not measured.
MEASURED: Mapping[str, Measured] = {
    "gpt2": Measured((18.0, 10.0, 5.0), (18.0, 10.0, 5.0), (22.1, 10.0, 7.0), 18.0),
    "gptj": Measured((16.4, 10.0, 6.0), (16.8, 9.9, 6.0), (20.9, 9.9, 6.0), 12.4),
    "gpt_neox": Measured((14.0, 4.0, 6.0), (18.2, 4.0, 6.0), (16.3, 4.0, 6.0), 20.0),
    "llama": Measured((24.0, 8.0, 6.0), (28.4, 8.0, 8.0), (34.4, 8.0, 10.0), 24.0),
    "t5": Measured((39.5, 5.0, 7.5), (39.5, 5.0, 10.5), (45.5, 5.0, 10.5), None),
    "flan_t5": Measured((39.5, 15.0, 7.5), (39.5, 15.0, 10.5), (47.5, 15.0, 10.5), None),
    "bert": Measured((18.0, 4.0, 5.0), (18.0, 4.0, 5.0), (26.1, 4.0, 7.0), 18.0),
}
_ALIASES = {"roberta": "bert", "mistral": "llama"}
_NAMES = {"flan_t5": "t5 (gated-gelu)"}
# The largest relative error of a fit over its grid (1.2 %, GPT-J under autocast), rounded up.
MEASURED_ERROR = 0.02
# What a GPU may keep that the CPU run does not show: CUDA autocast's list of operations run in
# fp32 is longer than the CPU's (``pow`` among them), kernels' own buffers.
GPU_MARGIN = 0.05


def measured_family(shape: ModelShape) -> Optional[str]:
    """The measured family whose layers ``shape`` runs, or None."""
    family = _ALIASES.get(shape.family, shape.family)
    if family == "t5" and shape.gated_ffn:
        return "flan_t5"
    return family if family in MEASURED else None


def _tensors(terms: tuple[float, float, float], flash: Optional[float]) -> LayerTensors:
    hidden, ffn, scores = terms
    return LayerTensors(hidden, 0, ffn, scores, flash)


def band(shape: ModelShape, kind: LayerKind) -> LayerBand:
    """The low, central and high count of one of ``shape``'s layers run as ``kind``."""
    formula = korthikanti(shape)
    if kind is LayerKind.LIBRARY:
        return LayerBand(
            formula.scaled(0.95), formula, formula.scaled(1.10), "Korthikanti et al. 2022"
        )
    family = measured_family(shape)
    if family is None:
        return LayerBand(
            formula.scaled(0.85),
            formula,
            formula.scaled(2.0),
            f"Korthikanti et al. 2022: no measurement of the Hugging Face {shape.family} layer",
        )
    found = MEASURED[family]
    versions = (found.current, found.v4_28)
    least = tuple(min(terms) for terms in zip(*versions))
    most = tuple(max(terms) for terms in zip(*versions, found.autocast))
    flash_high = None
    if found.flash_hidden is not None:  # what the older version or autocast adds, whatever
        flash_high = found.flash_hidden + most[0] - found.current[0]  # the attention kernel
    return LayerBand(
        _tensors((least[0], least[1], least[2]), found.flash_hidden).scaled(1 - MEASURED_ERROR),
        _tensors(found.current, found.flash_hidden),
        _tensors((most[0], most[1], most[2]), flash_high).scaled(1 + GPU_MARGIN),
        f"the tensors the Hugging Face {_NAMES.get(family, family)} layer saves, measured",
    )


def counted_families() -> tuple[str, ...]:
    """The Hugging Face families with a measurement of their own (``docs/plan.md`` lists
    them)."""
    return tuple(MEASURED)


def factor(shape: ModelShape, seq: int, flash: bool) -> float:
    """The central Hugging Face count over Korthikanti's formula for one layer of ``shape``."""
    hf = band(shape, LayerKind.HUGGING_FACE).central.bytes(shape, seq, 1, 1, flash)
    return hf / korthikanti(shape).bytes(shape, seq, 1, 1, flash)
