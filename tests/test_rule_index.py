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

BAD = """import smdistributed.modelparallel.torch as smp
import torch

smp.init()
model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
model = smp.DistributedModel(model)
"""


def test_every_rule_module_is_named_for_its_rule() -> None:
    for rule in all_rules():
        module = rule.__module__.rsplit(".", 1)[-1]
        assert module.startswith(rule.code.lower() + "_"), (
            f"{rule.__module__} defines {rule.code}: name the module {rule.code.lower()}_<name>.py"
        )
    assert rule_codes() == tuple(rule.code for rule in all_rules())


def test_lazy_names_select_like_the_loaded_ones() -> None:
    lazy, loaded = RuleNames(), rule_names()
    assert list(lazy) == sorted(loaded) and len(lazy) == len(loaded) and "SMP101" in lazy
    for selectors in (
        ["ALL"],
        ["SMP1"],
        ["SMP101", "smp3"],
        ["optimizer-before-distributed-model"],
    ):
        assert enabled(lazy, selectors, [], ["SMP301"]) == enabled(
            loaded, selectors, [], ["SMP301"]
        )


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
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    return done.stderr.strip().splitlines()[-1]


def test_tree_without_the_library_never_imports_libcst(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    for number in range(5):
        (tmp_path / "pkg" / f"m{number}.py").write_text(
            f"import torch\nx = {number}\n", encoding="utf-8"
        )
    assert (
        _probe("check", "--select", "SMP1", "--ignore", "SMP101", ".", cwd=tmp_path)
        == "NO-LIBCST 0"
    )
    assert _probe("check", "--select", "NOPE1", ".", cwd=tmp_path).endswith(" 2")


def test_unchanged_scripts_from_the_cache_never_import_libcst(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(BAD, encoding="utf-8")
    first = _probe("check", "--select", "SMP101", "train.py", cwd=tmp_path)
    assert first == "LIBCST 1"
    assert _probe("check", "--select", "SMP101", "train.py", cwd=tmp_path) == "NO-LIBCST 1"


def _sample_facts() -> list[tuple[str, object]]:
    """The facts of every fixture and example: scripts of both flavours, launchers, helpers."""
    import libcst as cst

    from smpfix.program.facts import collect

    root = Path(__file__).resolve().parent.parent
    found = []
    for path in sorted([*root.glob("tests/fixtures/**/*.py"), *root.glob("examples/**/*.py")]):
        try:
            module = cst.parse_module(path.read_text(encoding="utf-8"))
        except (cst.ParserSyntaxError, UnicodeDecodeError, RecursionError):
            continue
        found.append((str(path.relative_to(root)), collect(module)))
    return found


def test_every_rule_stays_inside_its_scope() -> None:
    """A file's analysis imports and runs only the rules whose scope admits the file, so a
    rule that would apply outside its scope would silently never run there."""
    from smpfix.rules.registry import _rule_modules

    family_of = {module.code: module for module in _rule_modules()}
    samples = _sample_facts()
    assert len(samples) > 100
    for rule in all_rules():
        module = family_of[rule.code]
        for name, facts in samples:
            if rule.applies_to(facts):
                assert module.scope.admits(facts), (
                    f"{rule.code} applies to {name}, outside its scope {module.scope.name} ({module.scope.value}; "
                    f"its family {module.family!r}): give it its own entry in RULE_SCOPES in smpfix/rules/scope.py, "
                    "or make its applies_to stricter"
                )


def test_every_family_has_a_scope() -> None:
    from smpfix.rules.registry import _rule_modules
    from smpfix.rules.scope import FAMILY_SCOPES

    families = {module.family for module in _rule_modules()}
    missing = sorted(families - set(FAMILY_SCOPES))
    assert not missing, (
        f"add the rule families {missing} to FAMILY_SCOPES in smpfix/rules/scope.py (which files they can report on)"
    )


_IMPORTED_RULES = """
import sys
from smpfix.api import check_source
check_source(open(sys.argv[1]).read(), select=sys.argv[2].split(",") if len(sys.argv) > 2 else None)
print(" ".join(sorted(name.rsplit(".", 1)[-1][:6].upper() for name in sys.modules if name.count(".") == 3 and name.startswith("smpfix.rules.") and not name.rsplit(".", 1)[-1].startswith("_"))))
"""


def test_a_file_imports_only_the_rules_that_can_apply_to_it(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(BAD, encoding="utf-8")

    def imported(*select: str) -> set[str]:
        done = subprocess.run(
            [sys.executable, "-c", _IMPORTED_RULES, str(script), *select],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        return set(done.stdout.split())

    everything = imported()
    assert "SMP101" in everything and "SMP900" in everything
    # Neither a launcher nor an smp.init dict: no configuration rule is imported.
    from smpfix.rules.scope import RULE_SCOPES

    assert not any(code.startswith("SMP8") and code not in RULE_SCOPES for code in everything)
    assert imported("SMP101,SMP2") == {
        "SMP101",
        *(code for code in rule_codes() or () if code.startswith("SMP2")),
    }
    # The PyTorch flavour: no TensorFlow rule; the TensorFlow flavour: no tensor or sharded data parallelism.
    assert not any(code.startswith("SMP7") for code in everything)
    script.write_text(
        "import smdistributed.modelparallel.tensorflow as smp\nsmp.init()\n", encoding="utf-8"
    )
    tensorflow = imported()
    assert any(code.startswith("SMP7") for code in tensorflow)
    assert not any(code.startswith(("SMP5", "SMP6")) for code in tensorflow)
    launcher = 'import smdistributed.modelparallel.torch as smp\nsmp.init({"microbatches": 3, "pipeline_parallel_degree": 2})\n'
    script.write_text(launcher, encoding="utf-8")
    assert "SMP801" in imported()
