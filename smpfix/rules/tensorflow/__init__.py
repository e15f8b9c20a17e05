"""SMP7xx: TensorFlow scripts (gradient tape, checkpoints, Horovod, the model class, step outputs,
XLA, input files).

Rule modules import the rule framework (smpfix.rules.rule), program, job and base; never each other.
"""

from smpfix.rules.scope import FileScope

# The files its rules can report on, read by the registry before it imports any of them.
SCOPE = FileScope.TENSORFLOW
