"""``python -m smpfix``: the command line, without importing anything from the current folder.

``python -m`` puts the current folder first on ``sys.path``, and smpfix is usually run from
the folder it checks: a ``click.py`` or ``libcst.py`` there would be imported, and run, in
place of the real module. The entry is removed before anything else is imported, as
``python -P`` (Python 3.11) does; the package itself is already imported, so its modules are
still found through its own path.
"""

import os
import sys


def _forget_current_folder() -> None:
    if getattr(sys.flags, "safe_path", False) or not sys.path:
        return
    first = sys.path[0]
    if first in ("", os.curdir) or os.path.abspath(first) == os.getcwd():
        del sys.path[0]


_forget_current_folder()

from smpfix.cli import run  # noqa: E402  (after the current folder is gone from sys.path)

if __name__ == "__main__":
    run()
