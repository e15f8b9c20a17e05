"""Running the rules over files: discovery, configuration, analysis, the fix loop, the cache,
workers.

May import the layers below (rules, program, job, suppressions, base); never the CLI, the API
or the report."""
