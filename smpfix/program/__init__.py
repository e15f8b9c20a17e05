"""What a training script does with the library: facts, guards, steps, data loaders, the wrapped model.

May import ``smpfix.job`` and ``smpfix.base``; it knows no rule and never reports."""
