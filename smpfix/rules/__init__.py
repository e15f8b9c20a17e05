"""The rules: the framework (``rule``, ``config_rule``, ``registry``, ``pages``) and one module per
rule, by family.

May import program, job, suppressions and base; never the engine, the report, the CLI or the API."""
