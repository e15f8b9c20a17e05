"""SMP9xx: smpfix's own comments (suppressions that suppress nothing).

Rule modules import the rule framework (smpfix.rules.rule), suppressions and base; never each other.
"""

from smpfix.rules.scope import FileScope

# The files its rules can report on, read by the registry before it imports any of them: every
# file, since launcher code that never imports the library has suppressions too.
SCOPE = FileScope.ANY
