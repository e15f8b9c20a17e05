"""SMP815: fp16 and bf16 cannot both be on; ``fp16_params`` where ``fp16`` replaces it.

``fp16_params`` is not a former name of ``fp16``. In the 1.12.1 library it only makes the
library's distributed modules create their parameters in fp16 (``backend/config.py``:
``_fp16_param_init = fp16 or fp16_params``); ``fp16`` does that too and also wraps the model
and the optimizer in the library's fp16 wrappers (``Bit16_Module``, ``Bit16_Optimizer``, with
fp32 master weights and loss scaling). The schema marks ``fp16_params`` deprecated with ``fp16``
as its replacement, which is right for a script that leaves fp16 training to the library, and
wrong for one that runs its own (the GPT-2 example before 1.10 wraps the model and optimizer in
its own ``FP16_Module``/``FP16_Optimizer`` and sets ``fp16_params``): ``fp16`` would wrap them a
second time. So the replacement is advised only where smpfix reads the script and it runs no
fp16 of its own; a ``fp16_params`` that changes nothing (False, or beside ``"fp16": True``) is
advice to remove it.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.job.versions import leading
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.launched_code import LaunchedCode, launched_code
from smpfix.rules.rule import FixAvailability, TensorParallelism

# The release that added the `fp16` key and deprecated `fp16_params`.
FP16_KEY_SINCE = (1, 10)

# Calls that show a script running fp16 training itself: its own wrappers (the GPT-2 example's
# `fp16` package, apex's fp16_utils), apex amp, PyTorch autocast and loss scaling.
_OWN_WRAPPERS = frozenset({"FP16_Module", "FP16_Optimizer", "FP16Module", "FP16Optimizer"})
_OWN_MIXED_PRECISION = frozenset(
    {
        "apex.amp.initialize",
        "torch.autocast",
        "torch.cuda.amp.autocast",
        "torch.amp.autocast",
        "torch.cuda.amp.GradScaler",
        "torch.amp.GradScaler",
        "smdistributed.modelparallel.torch.amp.GradScaler",
    }
)
_DEPRECATED = (
    "`fp16_params` is deprecated from SMP 1.10 (the library's schema marks it so and names `fp16`"
    " as its replacement)"
)


class Fp16AndBf16Together(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        "`bf16` requires `fp16` and `fp16_params` to be False; the deprecated `fp16_params` where"
        " `fp16` replaces it."
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
                names = " and ".join(f"`{key}`" for key in both)
                yield ConfigProblem(
                    bf16,
                    f"`bf16` with {names} also True: the job fails at start-up",
                    Severity.ERROR,
                    explanation=(
                        "The library runs in one half-precision format, and setting bf16 requires"
                        ' fp16 and fp16_params to be False ("Setting config parameter bf16 to'
                        ' non-default value True requires fp16 to be set to False"), so the job'
                        " stops at start-up after the instances are up. Keep one: bf16 (which the"
                        " library supports only with sharded data parallelism) or fp16."
                    ),
                )
                return
        fp16_params = view.located("fp16_params")
        if fp16_params is None:
            return
        if view.value("fp16") is True:
            yield ConfigProblem(
                fp16_params,
                '`fp16_params` adds nothing beside `"fp16": True`',
                Severity.HINT,
                explanation=(
                    '`"fp16": True` already makes the library create the parameters of its'
                    " distributed modules in fp16, which is all `fp16_params` does. "
                    f"{_DEPRECATED}. Remove it."
                ),
                since=FP16_KEY_SINCE,
            )
        elif fp16_params.plain() is False:
            yield ConfigProblem(
                fp16_params,
                "`fp16_params` False is the library's default: the deprecated key can go",
                Severity.HINT,
                explanation=(
                    "False is what the library uses when the key is left out, so it changes"
                    f" nothing. {_DEPRECATED}. Remove it."
                ),
                since=FP16_KEY_SINCE,
            )

    def check_with_code(self, view: ConfigView) -> Iterator[ConfigProblem]:
        fp16_params = view.located("fp16_params")
        if (
            fp16_params is None
            or fp16_params.plain() is False
            or view.value("fp16") is True
            or view.value("bf16") is True
        ):
            return  # `check` covers these
        code = launched_code(self.program, view)
        if code is None or _runs_own_fp16(code):
            # Unread code may run its own fp16, and then `fp16` would wrap it a second time.
            return
        value = fp16_params.plain()
        written = '`"fp16": True`' if value is True else "`fp16` (with the same value)"
        yield ConfigProblem(
            fp16_params,
            '`fp16_params` is deprecated: from SMP 1.10 fp16 training is `"fp16": True`',
            Severity.HINT,
            explanation=(
                "`fp16_params` only makes the library create the parameters of its distributed"
                " modules in fp16; the rest of fp16 training (casting the model, fp32 master"
                " weights, loss scaling) is left to the script, which does none of it. From SMP"
                ' 1.10 `"fp16": True` does all of it: it creates those parameters in fp16 too and'
                " wraps the model and the optimizer in the library's fp16 wrappers, and the"
                " library's schema names it as the replacement of the deprecated `fp16_params`."
                f" {leading(view.version_condition(FP16_KEY_SINCE))} write {written} instead and"
                " give `smp.DistributedOptimizer` a loss scale (`static_loss_scale` or"
                " `dynamic_loss_scale=True`), as the fp16 training guide shows (releases before"
                " 1.10 know only `fp16_params`)."
            ),
            evidence=(
                f"{code.script} (and the project modules it imports) runs no fp16 of its own: no"
                " `.half()`, FP16_Module/FP16_Optimizer, apex amp or autocast",
            ),
            since=FP16_KEY_SINCE,
        )


def _runs_own_fp16(code: LaunchedCode) -> bool:
    """Whether the script or a project module it imports trains in fp16 by itself: ``.half()``,
    its own ``FP16_Module``/``FP16_Optimizer``, apex amp, or PyTorch autocast and loss
    scaling."""
    for facts in code.files:
        for call in facts.call_order:
            func = call.func
            if type(func) is cst.Attribute and func.attr.value == "half" and not call.args:
                return True
            name = (
                func.value
                if type(func) is cst.Name
                else func.attr.value
                if type(func) is cst.Attribute
                else None
            )
            if name in _OWN_WRAPPERS:
                return True
            if facts.qualified_name(func) in _OWN_MIXED_PRECISION:
                return True
    return False
