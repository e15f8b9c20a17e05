"""SMP0xx: SMP v2 (``torch.sagemaker``), and mixing SMP v1 and v2 up.

SMP v2 is a second library, not a flavour of v1: FSDP with hybrid sharding, tensor, context and
expert parallelism through ``torch.sagemaker.transform``, launched by torchrun. Its rules run on
SMP v2 jobs only (``Rule.library``); the mix-up rules (SMP001-SMP009) on either library's jobs,
the configuration rules on each SMP v2 configuration a file writes (a launcher, a ``tsm.init``
dict or JSON file), whatever the file's own job.

| codes | what |
| --- | --- |
| SMP001-SMP009 | v1/v2 mix-ups (errors) |
| SMP010-SMP019 | the v2 configuration schema |
| SMP020-SMP049 | v2 script pitfalls |

Rule modules import the rule framework (smpfix.rules.rule, config_rule), this family's helpers,
program, job and base; never each other.
"""

from smpfix.rules.scope import FileScope

# The files its rules can report on, read by the registry before it imports any of them.
SCOPE = FileScope.EITHER_LIBRARY
