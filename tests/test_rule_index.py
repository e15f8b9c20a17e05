"""Rule codes known without importing the rules, and a start-up that never needs LibCST.

``smpfix check`` on a tree where no file mentions the library (or where every such file has
a cached result) must not import LibCST or the rules; it learns the rule codes from the
rule modules' names, which this file holds to their classes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from smpfix.engine.selection import enabled
from smpfix.rules.registry import RuleNames, all_rules, rule_codes, rule_names

BAD = '''import smdistributed.modelparallel.torch as smp
import torch

smp.init()
model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
model = smp.DistributedModel(model)
'''


def test_every_rule_module_is_named_for_its_rule() -> None:
    for rule in all_rules():
        module = rule.__module__.rsplit(".", 1)[-1]
        assert module.startswith(rule.code.lower() + "_"), f"{rule.__module__} defines {rule.code}: name the module {rule.code.lower()}_<name>.py"
    assert rule_codes() == tuple(rule.code for rule in all_rules())


def test_lazy_names_select_like_the_loaded_ones() -> None:
    lazy, loaded = RuleNames(), rule_names()
    assert list(lazy) == sorted(loaded) and len(lazy) == len(loaded) and "SMP101" in lazy
    for selectors in (["ALL"], ["SMP1"], ["SMP101", "smp3"], ["optimizer-before-distributed-model"]):
        assert enabled(lazy, selectors, [], ["SMP301"]) == enabled(loaded, selectors, [], ["SMP301"])


_PROBE = """
import sys
from smpfix.cli import main
sys.argv = ["smpfix", *sys.argv[1:]]
try:
    main()
except SystemExit as exit:
    code = exit.code
print("LIBCST" if "libcst" in sys.modules else "NO-LIBCST", code, file=sys.stderr)
"""


def _probe(*args: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    return done.stderr.strip().splitlines()[-1]


def test_tree_without_the_library_never_imports_libcst(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    for number in range(5):
        (tmp_path / "pkg" / f"m{number}.py").write_text(f"import torch\nx = {number}\n", encoding="utf-8")
    assert _probe("check", "--select", "SMP1", "--ignore", "SMP101", ".", cwd=tmp_path) == "NO-LIBCST 0"
    assert _probe("check", "--select", "NOPE1", ".", cwd=tmp_path).endswith(" 2")


def test_unchanged_scripts_from_the_cache_never_import_libcst(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(BAD, encoding="utf-8")
    first = _probe("check", "--select", "SMP101", "train.py", cwd=tmp_path)
    assert first == "LIBCST 1"
    assert _probe("check", "--select", "SMP101", "train.py", cwd=tmp_path) == "NO-LIBCST 1"
