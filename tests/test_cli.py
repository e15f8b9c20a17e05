"""The command-line contract, exercised through the installed ``smpfix`` command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_cli

BAD = """import smdistributed.modelparallel.torch as smp
import torch

smp.init()
with smp.model_creation(tensor_parallelism=smp.tp_size() > 1): model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
model = smp.DistributedModel(model)
if smp.dp_rank() == 0:
    smp.save(model.local_state_dict(), "m.pt", partial=True)
optimizer = smp.DistributedOptimizer(optimizer)
"""

FIXED = """import smdistributed.modelparallel.torch as smp
import torch

smp.init()
with smp.model_creation(tensor_parallelism=smp.tp_size() > 1): model = GPT()
model = smp.DistributedModel(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
if smp.rdp_rank() == 0:
    smp.save(model.local_state_dict(), "m.pt", partial=True)
optimizer = smp.DistributedOptimizer(optimizer)
"""

CLEAN = """import smdistributed.modelparallel.torch as smp

smp.init()
model = smp.DistributedModel(GPT())
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# Each flavour's example pair: the codes its pitfalls twin must show (with its launcher).
EXAMPLE_PAIRS = {
    "pytorch": {"SMP101", "SMP301", "SMP801"},
    "tensorflow": {
        "SMP201",
        "SMP203",
        "SMP701",
        "SMP702",
        "SMP703",
        "SMP704",
        "SMP705",
        "SMP706",
        "SMP707",
        "SMP812",
    },
}


@pytest.mark.parametrize("flavour", sorted(EXAMPLE_PAIRS))
def test_examples_pitfalls_are_reported_and_the_twin_is_clean(flavour: str) -> None:
    bad = run_cli("check", "--no-cache", "--format", "json", str(EXAMPLES / flavour / "pitfalls"))
    assert bad.code == 1
    assert EXAMPLE_PAIRS[flavour] <= {finding["code"] for finding in json.loads(bad.stdout)}
    good = run_cli("check", "--no-cache", str(EXAMPLES / flavour / "correct"))
    assert good.code == 0, good.stdout
    assert "All checks passed!" in good.stdout


@pytest.mark.parametrize("flavour", sorted(EXAMPLE_PAIRS))
def test_apply_on_a_copy_of_the_examples_fixes_the_safe_ones(tmp_path: Path, flavour: str) -> None:
    copy = tmp_path / "examples"
    shutil.copytree(EXAMPLES, copy)
    pitfalls, correct = copy / flavour / "pitfalls", copy / flavour / "correct"
    before = run_cli("check", "--no-cache", "--format", "json", str(pitfalls))
    safe = [
        f for f in json.loads(before.stdout) if f["fix"] and f["fix"]["applicability"] == "safe"
    ]
    assert safe
    first = run_cli("--apply", "--no-cache", str(pitfalls))
    assert first.code in (0, 1)
    after = json.loads(run_cli("check", "--no-cache", "--format", "json", str(pitfalls)).stdout)
    assert all(not (f["fix"] and f["fix"]["applicability"] == "safe") for f in after)
    assert len(after) == len(json.loads(before.stdout)) - len(safe) or len(after) < len(
        json.loads(before.stdout)
    )
    for script in (EXAMPLES / flavour / "correct").iterdir():
        assert (correct / script.name).read_text() == script.read_text()


def test_default_command_and_exit_codes(tmp_path: Path) -> None:
    write(tmp_path, "bad.py", BAD)
    write(tmp_path, "clean.py", CLEAN)
    assert run_cli(str(tmp_path / "bad.py")).code == 1
    assert run_cli("check", str(tmp_path / "clean.py")).code == 0
    assert run_cli("check", "--exit-zero", str(tmp_path / "bad.py")).code == 0
    assert run_cli("check", "--select", "NOPE1", str(tmp_path)).code == 2


def test_full_format_has_location_code_marker_severity_frame_and_summary(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.py", BAD)
    out = run_cli("check", "--job", "tensor_parallel_degree=4", str(path)).stdout
    assert f"{path}:6:13: SMP101 [*] error: " in out
    assert f"{path}:8:4: SMP301 [*] error: " in out
    assert "6 | optimizer = torch.optim.AdamW" in out
    assert "= help:" in out
    assert "Found 2 problems (2 fixable with --apply)." in out


def test_concise_format_is_one_line_per_finding(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.py", BAD)
    lines = run_cli("check", "--format", "concise", "-q", str(path)).stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith(str(path)) for line in lines)


def test_json_format_uses_ruff_field_names(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.py", BAD)
    result = run_cli("check", "--format", "json", "--job", "tensor_parallel_degree=4", str(path))
    data = json.loads(result.stdout)
    first = data[0]
    assert set(first) >= {
        "code",
        "name",
        "message",
        "filename",
        "location",
        "end_location",
        "fix",
        "severity",
        "url",
        "job_facts",
    }
    assert first["code"] == "SMP101" and first["location"] == {"row": 6, "column": 13}
    assert first["url"] == "https://smpfix.github.io/smpfix/rules/SMP101/"
    assert first["fix"]["applicability"] == "safe"
    assert first["job_facts"] == [{"feature": "TP", "state": "on", "source": "command line --job"}]
    edit = first["fix"]["edits"][0]
    assert set(edit) == {"content", "location", "end_location"}


def test_apply_writes_safe_fixes_and_exit_reflects_what_remains(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.py", BAD)
    result = run_cli("--apply", str(path))
    assert path.read_text() == FIXED
    assert result.code == 0, result.stdout
    assert "2 fixed, 0 remaining" in result.stdout


def test_diff_prints_changes_writes_nothing_and_exits_1(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.py", BAD)
    result = run_cli("check", "--diff", str(path))
    assert result.code == 1
    assert (
        "-if smp.dp_rank() == 0:" in result.stdout and "+if smp.rdp_rank() == 0:" in result.stdout
    )
    assert path.read_text() == BAD
    clean = write(tmp_path, "clean.py", CLEAN)
    assert run_cli("check", "--diff", str(clean)).code == 0


def test_stdin_check_and_apply() -> None:
    checked = run_cli("check", "-", "--stdin-filename", "train.py", stdin=BAD)
    assert checked.code == 1 and "train.py:6:13: SMP101" in checked.stdout
    fixed = run_cli("--apply", "-", "--stdin-filename", "train.py", stdin=BAD)
    assert fixed.stdout == FIXED
    assert fixed.code == 0


def test_select_ignore_prefixes_and_names(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.py", BAD)

    def codes(*args: str) -> set:
        return {
            f["code"]
            for f in json.loads(run_cli("check", "--format", "json", *args, str(path)).stdout)
        }

    assert codes() == {"SMP101", "SMP301"}
    assert codes("--select", "SMP3") == {"SMP301"}
    assert codes("--select", "optimizer-before-distributed-model") == {"SMP101"}
    assert codes("--ignore", "SMP1") == {"SMP301"}
    assert codes("--select", "SMP3", "--extend-select", "SMP101") == {"SMP101", "SMP301"}
    assert codes("--select", "ALL", "--ignore", "SMP301,SMP101") == set()


def test_config_select_ignore_per_file_ignores_and_job(tmp_path: Path) -> None:
    write(
        tmp_path,
        "pyproject.toml",
        '[tool.smpfix]\nignore = ["SMP101"]\nper-file-ignores = { "legacy/*" = ["ALL"]'
        " }\n\n[tool.smpfix.job]\ntensor_parallel_degree = 1\n",
    )
    write(tmp_path, "train.py", BAD)
    write(tmp_path, "legacy/old.py", BAD)
    result = run_cli("check", "--format", "json", str(tmp_path))
    assert json.loads(result.stdout) == []
    tp = run_cli("check", "--format", "json", "--job", "tensor_parallel_degree=4", str(tmp_path))
    found = json.loads(tp.stdout)
    assert {(Path(f["filename"]).name, f["code"], f["severity"]) for f in found} == {
        ("train.py", "SMP301", "error")
    }


def test_unknown_config_key_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.smpfix]\nselct = ['SMP1']\n")
    write(tmp_path, "train.py", BAD)
    result = run_cli("check", str(tmp_path))
    assert result.code == 2 and "selct (did you mean select?)" in result.stderr
    write(tmp_path, "pyproject.toml", "[tool.smpfix.job]\ntensor_parallelism_degree = 4\n")
    result = run_cli("check", str(tmp_path))
    assert result.code == 2 and "tensor_parallel_degree" in result.stderr


def test_the_lint_table_holds_the_rule_selection_as_ruff_s_does(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", '[tool.smpfix.lint]\nignore = ["SMP101"]\n')
    write(tmp_path, "train.py", BAD)
    found = json.loads(run_cli("check", "--format", "json", str(tmp_path)).stdout)
    assert "SMP101" not in {item["code"] for item in found}
    write(
        tmp_path,
        "pyproject.toml",
        '[tool.smpfix]\nignore = ["SMP3"]\n[tool.smpfix.lint]\nignore = ["SMP101"]\n',
    )
    twice = run_cli("check", str(tmp_path))
    assert twice.code == 2 and "both in [tool.smpfix] and [tool.smpfix.lint]" in twice.stderr
    write(tmp_path, "pyproject.toml", '[tool.smpfix.lint]\nexclude = ["old/"]\n')
    misplaced = run_cli("check", str(tmp_path))
    assert misplaced.code == 2 and "belong(s) in [tool.smpfix]" in misplaced.stderr


def test_the_api_refuses_a_misspelt_job_setting() -> None:
    from smpfix.api import check_source

    with pytest.raises(ValueError, match="did you mean 'tensor_parallel_degree'"):
        check_source(BAD, job={"tensor_parallel_degre": 4})


def test_show_files_and_show_settings_say_what_a_run_would_use(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", '[tool.smpfix]\nignore = ["SMP1"]\nfail-on = "error"\n')
    write(tmp_path, "train.py", BAD)
    write(tmp_path, "data/loader.py", "x = 1\n")
    files = run_cli("check", "--show-files", ".", cwd=tmp_path)
    assert (files.code, files.stdout.splitlines()) == (0, ["data/loader.py", "train.py"])
    settings = run_cli("check", "--show-settings", "--job", "microbatches=4", ".", cwd=tmp_path)
    lines = settings.stdout.splitlines()
    assert settings.code == 0 and lines[0] == f"configuration: {tmp_path / 'pyproject.toml'}"
    assert "SMP101" not in lines[2] and "SMP301" in lines[2]
    assert "fail-on: error" in lines and "show-hints: false" in lines
    assert "job (command line --job): microbatches = 4" in lines
    # Ruff's name for --format is accepted too.
    concise = run_cli(
        "check", "--output-format", "concise", "--select", "SMP301", ".", cwd=tmp_path
    )
    assert "train.py:" in concise.stdout and "|" not in concise.stdout


def test_show_fixes_lists_what_apply_fixed_per_file_and_rule(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.smpfix.job]\ntensor_parallel_degree = 4\n")
    write(tmp_path, "train.py", BAD)
    write(tmp_path, "clean.py", "x = 1\n")
    shown = run_cli(
        "check", "--apply", "--show-fixes", "--select", "SMP101,SMP301", ".", cwd=tmp_path
    )
    listed = shown.stdout.split("Found")[0].splitlines()
    assert listed[-4:] == [
        "Fixed 2 problems:",
        "- train.py:",
        "    1 × SMP101 (optimizer-before-distributed-model)",
        "    1 × SMP301 (checkpoint-guard-uses-dp-rank)",
    ], shown.stdout
    again = run_cli("check", "--apply", "--show-fixes", ".", cwd=tmp_path)
    assert "Fixed" not in again.stdout


def test_explicit_config_file(tmp_path: Path) -> None:
    config = write(tmp_path / "conf", "pyproject.toml", '[tool.smpfix]\nselect = ["SMP301"]\n')
    path = write(tmp_path, "train.py", BAD)
    data = json.loads(
        run_cli("check", "--format", "json", "--config", str(config), str(path)).stdout
    )
    assert {f["code"] for f in data} == {"SMP301"}
    assert run_cli("check", "--config", str(tmp_path / "missing.toml"), str(path)).code == 2


def test_suppression_comments(tmp_path: Path) -> None:
    text = BAD.replace("lr=1e-4)\n", "lr=1e-4)  # smpfix: ignore[SMP101]\n").replace(
        "if smp.dp_rank() == 0:\n", "if smp.dp_rank() == 0:  # noqa: E501, SMP301\n"
    )
    path = write(tmp_path, "train.py", text)
    assert run_cli("check", str(path)).code == 0
    bare = write(tmp_path, "bare.py", BAD.replace("lr=1e-4)\n", "lr=1e-4)  # smpfix: ignore\n"))
    data = json.loads(run_cli("check", "--format", "json", str(bare)).stdout)
    assert {f["code"] for f in data} == {"SMP301"}
    other = write(tmp_path, "other.py", BAD.replace("lr=1e-4)\n", "lr=1e-4)  # noqa\n"))
    assert {
        f["code"] for f in json.loads(run_cli("check", "--format", "json", str(other)).stdout)
    } == {"SMP101", "SMP301"}


def test_suppression_on_first_line_of_a_multiline_statement(tmp_path: Path) -> None:
    text = BAD.replace(
        "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)\n",
        "optimizer = torch.optim.AdamW(  # smpfix: ignore[SMP101]\n    model.parameters(),\n   "
        " lr=1e-4,\n)\n",
    )
    path = write(tmp_path, "train.py", text)
    data = json.loads(run_cli("check", "--format", "json", str(path)).stdout)
    assert {f["code"] for f in data} == {"SMP301"}


def test_discovery_respects_gitignore_excludes_and_default_folders(tmp_path: Path) -> None:
    write(tmp_path, "train.py", BAD)
    write(tmp_path, ".gitignore", "generated/\n")
    write(tmp_path, "generated/train.py", BAD)
    write(tmp_path, ".venv/lib/train.py", BAD)
    write(tmp_path, "build/train.py", BAD)
    write(tmp_path, ".hidden/train.py", BAD)
    write(tmp_path, "old/train.py", BAD)
    (tmp_path / ".git").mkdir()
    data = json.loads(
        run_cli("check", "--format", "json", "--exclude", "old/", str(tmp_path)).stdout
    )
    assert {Path(f["filename"]).relative_to(tmp_path).as_posix() for f in data} == {"train.py"}


def test_unparsable_file_is_reported_and_the_others_still_checked(tmp_path: Path) -> None:
    write(tmp_path, "a_broken.py", "import smdistributed.modelparallel.torch as smp\ndef f(:\n")
    write(tmp_path, "b_train.py", BAD)
    result = run_cli("check", "--format", "json", str(tmp_path))
    assert result.code == 2
    assert (
        f"{tmp_path / 'a_broken.py'}:2:" in result.stderr and "error: syntax error" in result.stderr
    )
    assert {f["code"] for f in json.loads(result.stdout)} == {"SMP101", "SMP301"}


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    result = run_cli("check", str(tmp_path / "nope.py"))
    assert result.code == 2 and "nope.py" in result.stderr


def test_files_without_the_library_are_untouched_by_apply(tmp_path: Path) -> None:
    text = (
        "import torch\n\n\nif torch.distributed.get_rank() == 0:\n   "
        " torch.save(model.state_dict(), 'm.pt')\r\n"
    )
    path = tmp_path / "plain.py"
    path.write_bytes(text.encode())
    assert run_cli("--apply", str(path)).code == 0
    assert path.read_bytes() == text.encode()


def test_crlf_bom_and_latin1_survive_apply(tmp_path: Path) -> None:
    crlf = tmp_path / "crlf.py"
    crlf.write_bytes(BAD.replace("\n", "\r\n").encode())
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + BAD.encode())
    latin = tmp_path / "latin.py"
    latin.write_bytes(("# -*- coding: latin-1 -*-\n# caf\xe9\n" + BAD).encode("latin-1"))
    crlf.chmod(0o640)
    run_cli("--apply", str(tmp_path))
    assert crlf.read_bytes() == FIXED.replace("\n", "\r\n").encode()
    assert oct(crlf.stat().st_mode & 0o777) == oct(0o640)
    assert bom.read_bytes() == b"\xef\xbb\xbf" + FIXED.encode()
    assert latin.read_bytes() == ("# -*- coding: latin-1 -*-\n# caf\xe9\n" + FIXED).encode(
        "latin-1"
    )


def test_show_job_prints_facts_and_sources(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "train.py",
        BAD.replace("smp.init()", "smp.init({'microbatches': 4, 'tensor_parallel_degree': 2})"),
    )
    out = run_cli("check", "--show-job", "--job", "tensor_parallel_degree=4", str(path)).stdout
    assert "job facts" in out
    assert "TP           on       command line --job" in out
    assert "MB           on       smp.init({...}) at line 4" in out
    assert "tensor_parallel_degree = 4  (command line --job)" in out


def test_show_job_gives_a_file_of_which_nothing_is_known_one_line(tmp_path: Path) -> None:
    """A helper module no launcher configures used to get twelve "unknown" lines."""
    write(tmp_path, "utils.py", "import smdistributed.modelparallel.torch as smp\n\nsmp.rank()\n")
    out = run_cli("check", "--show-job", "--no-cache", "utils.py", cwd=tmp_path).stdout
    assert out.splitlines()[0] == (
        "utils.py: job facts: nothing known (SMP version and every feature unknown: not set in"
        " any known source)"
    )
    assert "unknown  " not in out and "Features:" not in out


def test_show_job_spells_out_the_feature_keys_it_prints(tmp_path: Path) -> None:
    path = write(tmp_path, "train.py", BAD)
    out = run_cli("check", "--show-job", "--job", "tensor_parallel_degree=4", str(path)).stdout
    printed = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    legend = out.splitlines()[out.splitlines().index("Features:") + 1 :]
    spelled = {line.split()[0]: line for line in legend if line.startswith("  ")}
    for key in ("TP", "PP", "SDP", "MB", "OSS", "HVD", "DDP", "DELAYED_INIT"):
        assert key in printed and key in spelled
    assert "optimizer state sharding: on when shard_optimizer_state = true" in spelled["OSS"]
    assert "Horovod data parallelism: on when horovod = true" in spelled["HVD"]
    assert "microbatching: on when microbatches > 1" in spelled["MB"]


def test_rules_explain_and_version() -> None:
    table = run_cli("rules", env={"COLUMNS": ""})  # a pipe: 100 columns, every column
    assert table.code == 0 and "SMP101" in table.stdout and "tensor_parallel_degree" in table.stdout
    rows = json.loads(run_cli("rules", "--format", "json").stdout)
    assert {"code", "name", "fix", "depends_on"} <= set(rows[0])
    page = run_cli("explain", "SMP301")
    assert page.code == 0 and page.stdout.startswith("# SMP301 checkpoint-guard-uses-dp-rank")
    assert run_cli("explain", "checkpoint-guard-uses-dp-rank").stdout == page.stdout
    assert run_cli("explain", "SMP999").code == 2
    assert run_cli("--version").stdout.startswith("smpfix ")


def test_python_dash_m_works(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = write(tmp_path, "bad.py", BAD)
    proc = subprocess.run(
        [sys.executable, "-m", "smpfix", "check", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 1 and "SMP101" in proc.stdout
