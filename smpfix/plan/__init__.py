"""Will it fit? A per-GPU memory plan for a model-parallel job, before the cluster starts.

Two halves, so that the numbers can be tested against the seeds' reference configurations
without any code to parse:

- pure functions of numbers: the parameter count of a model shape (``models``, with the
  Hugging Face configuration classes in ``hf_configs`` and well-known checkpoints in
  ``checkpoints``), the per-GPU memory of a training setup (``setup``, ``memory``), the
  verdict over switches smpfix could not resolve (``verdict``) and the smallest changes that
  make a job fit (``suggestions``);
- reading what the launched script builds (``script_code``, ``script_values``,
  ``script_model``, ``custom_models``, ``script_setup``): the model configuration or the
  project's own model class, the sequence length, the batch, activation checkpointing, flash
  attention, precision and optimizer, each traced to argparse defaults and the launcher's
  hyperparameters. ``planner`` puts the two together; ``results`` is what it returns.

An SMP v2 job (``torch.sagemaker``, PyTorch FSDP) is another library with its own memory model:
``planner`` hands it to ``planner_fsdp``, which estimates it with ``fsdp`` (and
``suggestions_fsdp``) from what ``script_fsdp`` reads in the script; SMP v1's model is never
applied to it.

Every approximation is stated in ``docs/plan.md``. The layer sits between the rules (SMP831
uses it) and the program facts it reads; it never reports findings and never prints.
"""
