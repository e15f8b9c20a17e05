"""The Hugging Face layer counts the plan uses are the measured ones.

``benchmarks/measure_layer_activations.py`` measured each family's layer on the CPU (torch
2.13.0) with two transformers versions and wrote the fits to ``benchmarks/layer_activations/``;
``smpfix.plan.layers`` carries them rounded to a tenth. These tests hold the two together,
without torch: a new measurement that moves a coefficient fails here until the plan follows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from smpfix.plan import layers
from smpfix.plan.checkpoints import CHECKPOINTS
from smpfix.plan.layers import LayerKind, band

TABLES = Path(__file__).resolve().parent.parent / "benchmarks" / "layer_activations"
CURRENT = "5.24.0"
OLDER = "4.28.1"
ROUNDING = 0.051  # the plan carries each coefficient to a tenth


def table(version: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        (TABLES / f"transformers-{version}.json").read_text(encoding="utf-8")
    )
    return found


def row(version: str, family: str, precision: str, attention: str) -> dict[str, Any]:
    """The fit of one case; the configuration's dropout, or PyTorch's attention without
    attention dropout (flash attention keeps no mask)."""
    for fit in table(version)["fits"]:
        if (fit["family"], fit["precision"], fit["attention"]) == (family, precision, attention):
            if fit["dropout"] in ("default", "hidden"):
                return dict(fit)
    raise AssertionError(f"no {family} {precision} {attention} fit for transformers {version}")


def terms(fit: dict[str, Any]) -> tuple[float, float, float]:
    return fit["hidden"], fit["mlp"], fit["scores"]


def close(carried: tuple[float, ...], measured: tuple[float, ...]) -> bool:
    return all(abs(a - b) <= ROUNDING for a, b in zip(carried, measured, strict=True))


def test_the_tables_were_measured_as_docs_plan_says() -> None:
    for version in (CURRENT, OLDER):
        measured = table(version)
        assert measured["transformers"] == version
        assert measured["torch"].startswith("2.13.0") and measured["device"] == "cpu"
        hidden = {shape[0] for shape in measured["grid"]["shapes"]}
        ratios = {shape[2] / shape[0] for shape in measured["grid"]["shapes"]}
        heads = {shape[1] for shape in measured["grid"]["shapes"]}
        assert min(len(hidden), len(ratios), len(heads)) >= 2  # the terms can be told apart
        assert len(measured["grid"]["sequences"]) >= 3 and len(measured["grid"]["batches"]) >= 2


@pytest.mark.parametrize("family", layers.counted_families())
def test_the_plan_carries_the_measured_coefficients(family: str) -> None:
    carried = layers.MEASURED[family]
    assert close(carried.current, terms(row(CURRENT, family, "bf16", "eager")))
    assert close(carried.v4_28, terms(row(OLDER, family, "bf16", "eager")))
    autocast = [terms(row(version, family, "autocast", "eager")) for version in (CURRENT, OLDER)]
    assert close(carried.autocast, tuple(max(column) for column in zip(*autocast)))
    sdpa = row(CURRENT, family, "bf16", "sdpa")
    if sdpa["scores"] < 0.1:  # PyTorch's flash kernel ran: no scores kept
        assert carried.flash_hidden is not None
        assert close((carried.flash_hidden,), (sdpa["hidden"],))
    else:  # the math path ran (T5's position bias is a mask): flash was not measured
        assert carried.flash_hidden is None


@pytest.mark.parametrize("family", layers.counted_families())
def test_the_band_covers_the_fits_error(family: str) -> None:
    used = [row(v, family, p, "eager") for v in (CURRENT, OLDER) for p in ("bf16", "autocast")]
    assert all(fit["max_error"] <= layers.MEASURED_ERROR for fit in used)


def test_dropout_masks_were_measured_at_one_byte() -> None:
    """The GPU's fused dropout keeps a 1-byte mask; the measurement runs that kernel. GPT-2's
    two residual dropouts add 2 bytes per s·b·h, its attention dropout a mask and an output
    (3 bytes per a·s²·b)."""
    for version in (CURRENT, OLDER):
        fits = [f for f in table(version)["fits"] if f["family"] == "gpt2"]
        on = next(f for f in fits if f["dropout"] == "default" and f["precision"] == "bf16")
        off = next(f for f in fits if f["dropout"] == "none")
        assert on["hidden"] - off["hidden"] == pytest.approx(2, abs=0.05)
        assert on["scores"] - off["scores"] == pytest.approx(3, abs=0.05)


@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_every_band_holds_its_central_count_with_and_without_flash(name: str) -> None:
    shape = CHECKPOINTS[name].shape
    ends = band(shape, LayerKind.HUGGING_FACE)
    for flash in (False, True):
        low, central, high = (
            tensors.bytes(shape, 2048, 2, 1, flash)
            for tensors in (ends.low, ends.central, ends.high)
        )
        assert low <= central <= high, (name, flash)


def test_a_family_without_a_measurement_gets_korthikanti_with_the_wide_band() -> None:
    shape = CHECKPOINTS["tiiuae/falcon-7b"].shape
    ends = band(shape, LayerKind.HUGGING_FACE)
    assert ends.central == layers.korthikanti(shape)
    assert "no measurement" in ends.source
