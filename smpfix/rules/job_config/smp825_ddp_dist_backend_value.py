"""SMP825: a ``ddp_dist_backend`` the library version does not accept.

The 1.12 schema allows only ``"nccl"``. SMP 1.13 (PyTorch 1.12.1 container) added the SMDDP
collectives and ``"auto"`` (use them where they run, else NCCL), which became the default.
Anything else stops ``smp.init``. ``"auto"`` is reported only where the job is known to run an
older release: writing it targets 1.13. A ``ddp_dist_backend`` without a ``ddp`` key is SMP822's.
"""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.titles import snippet

# The release that brought ``"auto"`` (with the SMDDP collectives); the 1.12 schema knows only
# "nccl".
AUTO_SINCE = (1, 13)
BEFORE_AUTO = (1, 12)


class DdpDistBackendValue(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        '`ddp_dist_backend` is `"nccl"`, or `"auto"` from SMP 1.13 on; anything else stops the'
        " library at start-up."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE
    finding_ranges = {'"auto"': (None, BEFORE_AUTO)}

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        located = view.located("ddp_dist_backend")
        value = located.plain() if located is not None else None
        if located is None or not isinstance(value, str) or value == "nccl":
            return
        if value == "auto":
            yield ConfigProblem(
                located,
                'ddp_dist_backend "auto" needs SMP 1.13: this older library stops at start-up',
                Severity.ERROR,
                explanation=(
                    '"auto" exists from SMP 1.13 on (PyTorch 1.12.1 container and later), where it'
                    ' is the default; the older libraries accept only "nccl" and stop at'
                    ' start-up. Write "nccl", or run a PyTorch 1.12.1 or later container.'
                ),
                until=BEFORE_AUTO,
                # Writing "auto" targets the release that has it: with the version unknown, say
                # nothing.
                implied=AUTO_SINCE,
            )
            return
        hint = f" (did you mean {value.lower()!r}?)" if value.lower() in ("auto", "nccl") else ""
        yield ConfigProblem(
            located,
            f"ddp_dist_backend {snippet(repr(value), 24)[1:-1]} is not a backend the library knows:"
            " start-up fails",
            Severity.ERROR,
            explanation=(
                'The library accepts "nccl", and from SMP 1.13 "auto" (SMDDP collectives where'
                f" they run, NCCL otherwise){hint}, and stops at start-up otherwise, after the"
                " instances are up."
            ),
        )
