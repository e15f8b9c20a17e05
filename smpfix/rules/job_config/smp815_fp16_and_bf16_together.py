"""SMP815: fp16 and bf16 cannot both be on; ``fp16_params`` is the deprecated name of ``fp16``."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.job.versions import leading
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism

# The release that added the `fp16` key and deprecated `fp16_params`.
FP16_KEY_SINCE = (1, 10)


class Fp16AndBf16Together(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        "`bf16` requires `fp16` (and the deprecated `fp16_params`) to be False; `fp16_params` is"
        " deprecated."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED
    finding_ranges = {"fp16_params": (FP16_KEY_SINCE, None)}

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        bf16 = view.located("bf16")
        if bf16 is not None and bf16.plain() is True:
            both = [
                key
                for key in ("fp16", "fp16_params")
                if (found := view.located(key)) is not None and found.plain() is True
            ]
            if both:
                shown = " and ".join(f"`{key}` is True" for key in both)
                yield ConfigProblem(
                    bf16,
                    f"`bf16` is True and {shown}: the library runs in one half-precision format,"
                    " and setting bf16 "
                    f'requires fp16 and fp16_params to be False ("Setting config parameter bf16 to'
                    f" non-default value True "
                    f'requires fp16 to be set to False"), so the job stops at start-up after the'
                    f" instances are up. Keep one: "
                    f"bf16 (which the library supports only with sharded data parallelism) or"
                    f" fp16.",
                    Severity.ERROR,
                )
        fp16_params = view.located("fp16_params")
        if fp16_params is not None:
            value = fp16_params.plain()
            written = f'`"fp16": {value!r}`' if isinstance(value, bool) else "`fp16`"
            # Before 1.10 the library has no `fp16` key: the advice would stop such a job.
            yield ConfigProblem(
                fp16_params,
                "`fp16_params` is deprecated from SMP 1.10, which replaced it with `fp16` (the"
                " library's schema names `fp16` as the replacement and logs a deprecation warning"
                " at start-up; the fp16 training guide uses `fp16`)."
                f" {leading(view.version_condition(FP16_KEY_SINCE))} write {written} instead"
                " (releases before 1.10 know only `fp16_params`).",
                Severity.HINT,
                since=FP16_KEY_SINCE,
            )
