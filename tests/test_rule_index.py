"""Rule codes known without importing the rules, and a start-up that never needs LibCST.

``smpfix check`` on a tree where no file mentions the library (or where every such file has
a cached result) must not import LibCST or the rules; it learns the rule codes and names
from the rule modules' names, which give the classes theirs when they are created.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from smpfix.base.flavour import BOTH
from smpfix.rules.registry import all_rules, rule_codes, rule_names
from smpfix.rules.rule import Rule, TensorParallelism
from smpfix.rules.scope import FileScope

BAD = """import smdistributed.modelparallel.torch as smp
import torch

smp.init()
model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
model = smp.DistributedModel(model)
"""


def test_codes_and_names_come_from_the_module_names_without_importing_the_rules() -> None:
    assert rule_codes() == tuple(rule.code for rule in all_rules())
    assert rule_names() == {rule.code: rule.name for rule in all_rules()}
    assert rule_names()["SMP101"] == "optimizer-before-distributed-model"


def _rule_class(module: str, **attributes: object) -> type[Rule]:
    """A rule class as if defined in ``module`` (never registered: the registry lists files)."""
    body = {"__module__": module, "tensor_parallelism": TensorParallelism.NONE, **attributes}
    return type("Probe", (Rule,), body)


def test_a_rule_gets_its_code_name_and_family_scope_when_its_class_is_created() -> None:
    rule = _rule_class("smpfix.rules.tensor_parallel.smp599_probe_rule")
    assert (rule.code, rule.name, rule.scope) == ("SMP599", "probe-rule", FileScope.PYTORCH)
    comment_rule = _rule_class("smpfix.rules.comments.smp999_probe", code="SMP999")
    assert comment_rule.code == "SMP999"
    assert comment_rule.flavours == BOTH  # a rule of every file, not PyTorch's scripts alone
    outside = _rule_class("tests.probes", code="SMP998", name="probe")
    assert (outside.code, outside.scope) == ("SMP998", FileScope.SMP)


@pytest.mark.parametrize(
    "module, attributes, complaint",
    [
        ("smpfix.rules.wiring.smp199_probe", {"code": "SMP198"}, "its module's name makes it"),
        ("smpfix.rules.wiring.smp199_probe", {"name": "other-name"}, "its module's name makes it"),
        # A script rule among the configuration rules would never run on a script.
        (
            "smpfix.rules.job_config.smp899_probe",
            {"scope": FileScope.SMP},
            "not within its family's",
        ),
        ("smpfix.rules.tensorflow.smp799_probe", {"flavours": BOTH}, "flavours its scope"),
        ("smpfix.rules.wiring.smp199_probe", {"tensor_parallelism": None}, "tensor parallelism"),
        (
            "smpfix.rules.wiring.smp199_probe",
            {"applies_to": classmethod(lambda cls, facts: True)},
            "overrides applies_to",
        ),
    ],
)
def test_a_rule_whose_declarations_contradict_each_other_is_refused(
    module: str, attributes: dict[str, object], complaint: str
) -> None:
    with pytest.raises(TypeError, match=complaint):
        _rule_class(module, **attributes)


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
    assert (
        _probe("check", "--select", "optimizer-before-distributed-model", ".", cwd=tmp_path)
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


def test_a_scope_within_another_admits_no_file_the_other_does_not() -> None:
    """The registry imports a family's rules only for files the family's scope admits, and a
    rule's scope lies within its family's: so no rule is kept from a file it applies to."""
    samples = _sample_facts()
    assert len(samples) > 100
    for inner in FileScope:
        for outer in FileScope:
            if not inner.within(outer):
                continue
            for name, facts in samples:
                assert not inner.admits(facts) or outer.admits(facts), (inner, outer, name)


_IMPORTED_RULES = """
import sys
from smpfix.api import check_source
check_source(open(sys.argv[1]).read(), select=sys.argv[2].split(",") if len(sys.argv) > 2 else None)
print(" ".join(sorted(name.split(".")[2] + "." + name.rsplit(".", 1)[-1][:6].upper() for name in sys.modules if name.count(".") == 3 and name.startswith("smpfix.rules.") and not name.rsplit(".", 1)[-1].startswith("_"))))
"""  # noqa: E501


def test_a_file_imports_only_the_rules_that_can_apply_to_it(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(BAD, encoding="utf-8")

    def imported(*select: str) -> set[str]:
        """The rule modules imported, as ``family.CODE``."""
        done = subprocess.run(
            [sys.executable, "-c", _IMPORTED_RULES, str(script), *select],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        return set(done.stdout.split())

    def codes(modules: set[str]) -> set[str]:
        return {module.split(".")[1] for module in modules}

    everything = imported()
    assert {"SMP101", "SMP802", "SMP900"} <= codes(everything)
    # Neither a launcher nor an smp.init dict: no configuration rule is imported.
    assert not any(module.startswith("job_config.") for module in everything)
    assert codes(imported("SMP101,SMP2")) == {
        "SMP101",
        *(code for code in rule_codes() if code.startswith("SMP2")),
    }
    # The PyTorch flavour: no TensorFlow rule; the TensorFlow flavour: no tensor or sharded data
    # parallelism.
    assert not any(module.startswith("tensorflow.") for module in everything)
    script.write_text(
        "import smdistributed.modelparallel.tensorflow as smp\nsmp.init()\n", encoding="utf-8"
    )
    tensorflow = imported()
    assert any(module.startswith("tensorflow.") for module in tensorflow)
    assert not any(
        module.startswith(("tensor_parallel.", "sharded_data_parallel.")) for module in tensorflow
    )
    launcher = (
        'import smdistributed.modelparallel.torch as smp\nsmp.init({"microbatches": 3,'
        ' "pipeline_parallel_degree": 2})\n'
    )
    script.write_text(launcher, encoding="utf-8")
    assert "job_config.SMP801" in imported()
