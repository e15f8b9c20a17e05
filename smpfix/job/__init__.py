"""What smpfix knows about the job: job facts, launchers and their links to scripts,
configuration keys.

May import ``smpfix.base`` only; it never looks into what a training script does."""
