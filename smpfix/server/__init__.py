"""The language server (``smpfix server``): smpfix's findings in the editor as the user types,
and its fixes one click away.

Another front end like the command line: it takes the editor's documents and settings, runs
the engine on them (``engine.runner``, ``engine.config``, ``engine.selection``), and turns the
results into the Language Server Protocol's diagnostics and code actions. Built on ``pygls``
and ``lsprotocol``, the optional dependencies ``smpfix[server]`` installs: nothing imports
this package unless the server runs.

- ``app``: the server, its handlers and the scheduling of checks;
- ``frames``: the client's input cut into messages, whatever it sends;
- ``analysis``: the analysis process, seen from the server (a queue, giving up stale jobs);
- ``worker``: what runs in that process (checks, fixes, the workspace they read);
- ``documents``: checking a document (a file, or a notebook's cells) and fixing it all;
- ``settings``: the editor's settings over ``pyproject.toml``, per document;
- ``launchers``: the launchers of each open document's project (the launcher index), kept current;
- ``protocol``: findings and edits as LSP diagnostics and text edits;
- ``actions``: the quick fixes, "suppress on this line" and "fix all".
"""
