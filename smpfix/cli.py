"""The ``smpfix`` command line: Ruff's conventions on top of the engine.

The CLI parses options, resolves each folder's configuration once, and hands paths to the
engine; it never walks trees or touches LibCST itself. ``check`` is the default command, so
``smpfix PATHS`` and ``smpfix --apply PATHS`` work.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import click

from smpfix import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


class _DefaultCheckGroup(click.Group):
    """A group that runs ``check`` when the first argument is not a subcommand."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (
            args[0] not in self.commands and args[0] not in ("--version", "--help", "-h")
        ):
            args = ["check", *args]
        return super().parse_args(ctx, args)


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _use_color(no_color: bool) -> bool:
    if no_color or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()


def run() -> None:
    """The ``smpfix`` command and ``python -m smpfix``: ``main``, then an exit that skips the
    interpreter's teardown.

    A check keeps the parsed helper modules, and what the analyses built on them, until it
    ends; freeing that one object at a time when the interpreter shuts down costs about a
    tenth of a project's check, for memory the operating system takes back at once. So once
    the command is done (its output flushed, the ``atexit`` handlers run) the process ends
    with ``os._exit`` and the same exit code, as mypy does. An exit this cannot reproduce
    exactly (a message for an exit code, output that cannot be flushed, another thread still
    running) takes the normal way out.
    """
    try:
        main()
    except SystemExit as done:
        code = 0 if done.code is None else done.code
        if not isinstance(code, int) or isinstance(code, bool) or _other_threads():
            raise
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            raise done from None
        import atexit

        atexit._run_exitfuncs()
        os._exit(code)


def _other_threads() -> bool:
    import threading

    return threading.active_count() > 1


@click.group(cls=_DefaultCheckGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="smpfix", message="%(prog)s %(version)s")
def main() -> None:
    """Find and fix misuses of SageMaker model parallelism (SMP v1) in training scripts."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--apply", "--fix", "apply", is_flag=True, help="Write safe fixes to the files.")
@click.option(
    "--unsafe-fixes", is_flag=True, help="Also apply (or show as fixable) fixes marked unsafe."
)
@click.option(
    "--show-fixes", is_flag=True, help="With --apply, list the findings fixed, per file and rule."
)
@click.option(
    "--diff",
    is_flag=True,
    help="Print the diff --apply would write; write nothing; exit 1 if there are changes.",
)
@click.option(
    "--select",
    multiple=True,
    help="Rules to enable: codes, prefixes (SMP1), names or ALL. Replaces the configured select.",
)
@click.option("--extend-select", multiple=True, help="Rules to enable in addition to select.")
@click.option("--ignore", multiple=True, help="Rules to disable (codes, prefixes, names).")
@click.option(
    "--format",
    "--output-format",
    "fmt",
    type=click.Choice(["full", "concise", "json", "json-lines", "sarif", "github", "junit"]),
    default="full",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--output-file",
    "-o",
    type=click.Path(dir_okay=False),
    help="Write the report to this file (atomically); the terminal gets the summary.",
)
@click.option(
    "--statistics",
    is_flag=True,
    help="Print how often each rule fired (and how many are fixable) instead of the findings.",
)
@click.option(
    "--add-noqa",
    is_flag=True,
    help=(
        "Add `# smpfix: ignore[CODE]` to every line with a finding, so the next check"
        " reports nothing."
    ),
)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning", "hint"]),
    help=(
        "Exit 1 only for findings at or above this severity (default: warning, or fail-on in"
        " [tool.smpfix])."
    ),
)
@click.option(
    "--show-hints/--hide-hints",
    default=None,
    help="Show hints in full and concise output, and let --apply fix them (or show-hints).",
)
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, without the summary line.")
@click.option(
    "--no-color",
    is_flag=True,
    help="Disable colours (also NO_COLOR, or when output is not a terminal).",
)
@click.option("--stdin-filename", help="The name to report for source read from stdin ('-').")
@click.option(
    "--config",
    "config_path",
    type=click.Path(),
    help=(
        "Use this configuration file (a pyproject.toml or an smpfix.toml) for every file,"
        " instead of each file's closest."
    ),
)
@click.option(
    "--job",
    "job_settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="A job setting, e.g. tensor_parallel_degree=4 (beats the configuration files).",
)
@click.option(
    "--show-job",
    is_flag=True,
    help="Print the job facts derived for each script and where each came from.",
)
@click.option("--exclude", multiple=True, help="Extra gitignore-style patterns to skip.")
@click.option(
    "--show-files", is_flag=True, help="List the files that would be checked, and check nothing."
)
@click.option(
    "--show-settings",
    is_flag=True,
    help=(
        "Print the settings in effect (configuration file, rules, job), and check nothing;"
        " given files, the settings of each and where each value came from."
    ),
)
@click.option(
    "--watch",
    is_flag=True,
    help="Check, then check again whenever a checked file, a launcher or the configuration"
    " changes, until Ctrl-C.",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Debug output on stderr: configuration, files, cache, launchers, timings.",
)
@click.option("--workers", type=int, default=0, help="Worker processes (default: all cores).")
@click.option(
    "--no-launcher-search",
    is_flag=True,
    help="Use only the launchers among the checked files; do not look for the project's others.",
)
@click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache.")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    envvar="SMPFIX_CACHE_DIR",
    help=(
        "Where to keep the result cache (default: .smpfix_cache in the project root;"
        " also SMPFIX_CACHE_DIR)."
    ),
)
def check(
    paths: tuple[str, ...],
    apply: bool,
    unsafe_fixes: bool,
    diff: bool,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    fmt: str,
    exit_zero: bool,
    fail_on: Optional[str],
    show_hints: Optional[bool],
    quiet: bool,
    no_color: bool,
    stdin_filename: Optional[str],
    config_path: Optional[str],
    job_settings: tuple[str, ...],
    show_job: bool,
    exclude: tuple[str, ...],
    workers: int,
    output_file: Optional[str] = None,
    statistics: bool = False,
    add_noqa: bool = False,
    no_cache: bool = False,
    cache_dir: Optional[str] = None,
    no_launcher_search: bool = False,
    show_files: bool = False,
    show_settings: bool = False,
    show_fixes: bool = False,
    watch: bool = False,
    verbose: bool = False,
) -> None:
    """Check PATHS (files, directories, or - for stdin); the default command."""
    if verbose:
        from smpfix.engine import verbose as debug_output

        debug_output.enable()
    try:
        code = (_watch if watch else _check)(
            paths or (".",),
            apply=apply,
            unsafe_fixes=unsafe_fixes,
            diff=diff,
            select=select,
            extend_select=extend_select,
            ignore=ignore,
            fmt=fmt,
            exit_zero=exit_zero,
            fail_on=fail_on,
            show_hints=show_hints,
            quiet=quiet,
            no_color=no_color,
            stdin_filename=stdin_filename,
            config_path=config_path,
            job_settings=job_settings,
            show_job=show_job,
            exclude=exclude,
            workers=workers,
            output_file=output_file,
            statistics=statistics,
            add_noqa=add_noqa,
            no_cache=no_cache,
            cache_dir=cache_dir,
            no_launcher_search=no_launcher_search,
            show_files=show_files,
            show_settings=show_settings,
            show_fixes=show_fixes,
        )
    except KeyboardInterrupt:
        click.echo("smpfix: interrupted", err=True)
        code = EXIT_INTERRUPTED
    sys.exit(code)


def _watch(paths: Sequence[str], **opts: Any) -> int:
    """``--watch``: check, then check again after each change, until Ctrl-C (exit 0).

    Each check is a whole ``_check`` with the result cache: an unchanged file is a cache hit,
    and a file whose launcher or configuration changed is not (its job is part of its cache
    key), so what is analyzed again is what changed and what depends on it. The files are
    looked at before each check, so an edit made while it runs is not missed; the fixes a
    check writes (``--apply``) start one more check, which finds nothing left to write."""
    problem = _watch_problem(paths, opts)
    if problem:
        return _usage_error(problem)
    from smpfix.engine import watch

    watched = _watched_set(paths, opts)
    header = "Starting smpfix in watch mode..."
    try:
        while True:
            if sys.stdout.isatty():
                click.clear()
            click.echo(f"[{_now()}] {header}", err=True)
            before = watch.states(watched.files())
            _check(paths, **opts)
            watched = _watched_set(paths, opts)  # the configuration may have changed
            click.echo(f"[{_now()}] Watching for file changes.", err=True)
            found = watch.wait_for_change(watched, before)
            header = f"File change detected: {watch.shown(found)}"
    except KeyboardInterrupt:
        return EXIT_CLEAN


def _now() -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S")


def _watch_problem(paths: Sequence[str], opts: Any) -> Optional[str]:
    """Why ``--watch`` cannot be combined with the other options, or None."""
    if "-" in paths:
        return "--watch re-checks files when they change; it cannot read from stdin"
    for option, name in (
        ("add_noqa", "--add-noqa"),
        ("show_files", "--show-files"),
        ("show_settings", "--show-settings"),
    ):
        if opts.get(option):
            return f"--watch cannot be combined with {name}, which checks nothing"
    return None


def _watched_set(paths: Sequence[str], opts: Any) -> Any:
    """The files the next check depends on (``smpfix.engine.watch``); the defaults when the
    configuration cannot be read (the check says why, and a fix of it is a change)."""
    from smpfix.engine.config import Config, ConfigError, resolve
    from smpfix.engine.watch import WatchedSet

    try:
        config = resolve(list(paths), opts["config_path"])
    except ConfigError:
        config = Config()
    return WatchedSet(
        paths=tuple(paths),
        exclude=(*config.exclude, *opts["exclude"]),
        root=config.root,
        respect_gitignore=config.respect_gitignore,
        launchers=config.launchers,
        search_launchers=not opts.get("no_launcher_search"),
        config_path=opts["config_path"],
    )


def _usage_error(message: str) -> int:
    click.echo(f"smpfix: error: {message}", err=True)
    return EXIT_ERROR


_CHECKED_OUTPUT = "cannot write {}: it is one of the checked files; the report would replace it"


def _discovered(
    paths: Sequence[str], config_path: Optional[str], job_settings: Sequence[str], exclude: Any
) -> tuple[Any, list[Any], list[Any]]:
    """The configuration, the declared jobs and the files of a run over ``paths`` (``plan``
    and ``migrate``); a usage error ends the command."""
    from smpfix.engine.config import ConfigError, resolve
    from smpfix.engine.discovery import Excluder, discover

    try:
        config = resolve(list(paths), config_path)
        declared = _declared_jobs(_cli_job(job_settings), config)
    except ConfigError as exc:
        sys.exit(_usage_error(str(exc)))
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        sys.exit(_usage_error(f"{missing[0]}: no such file or directory"))
    tasks = list(
        discover(
            paths, Excluder([*config.exclude, *exclude], config.root), config.respect_gitignore
        )
    )
    return config, declared, tasks


def _same_file(output: str, checked: str) -> bool:
    """Whether the report path ``output`` names the checked file ``checked`` (links followed)."""
    return os.path.normcase(os.path.realpath(output)) == os.path.normcase(os.path.realpath(checked))


def _check(paths: Sequence[str], **opts: Any) -> int:
    from smpfix.base.findings import Severity
    from smpfix.engine.config import ConfigError, resolve
    from smpfix.engine.config_tree import ConfigTree, Overlay, TreeExcluder, file_options
    from smpfix.engine.discovery import DiscoveredFile, discover
    from smpfix.engine.launcher_index import LauncherSearch
    from smpfix.engine.runner import RunOptions, collect_rarely, run
    from smpfix.engine.selection import SelectionError
    from smpfix.job.project import Project
    from smpfix.report import ReportOptions
    from smpfix.rules.registry import rule_names

    collect_rarely()
    stdin_name = opts["stdin_filename"]
    config_anchor = [stdin_name] if "-" in paths and stdin_name else list(paths)
    try:
        config = resolve(config_anchor, opts["config_path"])
        cli_job = _cli_job(opts["job_settings"])
    except ConfigError as exc:
        return _usage_error(str(exc))
    from smpfix.engine import verbose

    verbose.debug(
        "config",
        f"using the configuration in {config.path}"
        if config.path is not None
        else "no configuration file found; using the defaults",
    )
    # Each file takes its closest configuration; ``--config`` names one for all, as in Ruff.
    tree = ConfigTree(explicit=config if opts["config_path"] is not None else None)
    overlay = Overlay(
        select=tuple(_split(opts["select"])) if opts["select"] else None,
        extend_select=tuple(_split(opts["extend_select"])),
        ignore=tuple(_split(opts["ignore"])),
        job=cli_job,
    )
    names = rule_names()
    try:
        run_level = file_options(None, config, overlay, names)
    except SelectionError as exc:
        return _usage_error(str(exc))
    codes = run_level.select
    declared = list(run_level.declared_jobs)
    fail_on = Severity(opts.get("fail_on") or config.fail_on)
    asked = config.show_hints if opts.get("show_hints") is None else opts["show_hints"]
    # A hint that fails the build is shown (and fixable) like any failing finding.
    show_hints = asked or fail_on is Severity.HINT
    options = RunOptions(
        select=codes,
        rule_names=names,
        declared_jobs=tuple(declared),
        per_file_ignores=config.per_file_ignores,
        root=run_level.root,
        apply=opts["apply"] and not opts["diff"],
        unsafe_fixes=opts["unsafe_fixes"],
        fix_hints=show_hints,
        diff=opts["diff"],
        jobs=opts["workers"],
        show_job=opts["show_job"],
        project=Project.of(tuple(paths)),
        cache_dir=_cache_dir(config.root, opts.get("no_cache", False), opts.get("cache_dir")),
        launchers=None
        if opts.get("no_launcher_search")
        else LauncherSearch.of(config, opts["exclude"]),
        line_length=config.line_length,
    )
    fmt = opts["fmt"]
    problem = _output_option_problem(fmt, opts, list(paths) == ["-"])
    if problem:
        return _usage_error(problem)
    color = _use_color(opts["no_color"]) and not opts.get("output_file")
    report_options = ReportOptions(
        color=color,
        unsafe_fixes=opts["unsafe_fixes"],
        applied=options.apply,
        statistics=opts.get("statistics", False),
        output_file=opts.get("output_file"),
        show_hints=show_hints,
        fail_on=fail_on,
        show_fixes=opts.get("show_fixes", False),
    )

    output_file = opts.get("output_file")
    if output_file is not None and list(paths) == ["-"] and stdin_name is not None:
        if _same_file(output_file, stdin_name):
            return _usage_error(_CHECKED_OUTPUT.format(output_file))
    if opts.get("show_settings"):
        files = [p for p in paths if p != "-" and os.path.isfile(p)]
        if "-" in paths and stdin_name:
            files.insert(0, stdin_name)
        if not files:
            _print_settings(config, codes, declared, fail_on, show_hints)
            return EXIT_CLEAN
        from smpfix.engine.settings_report import RunLevel, describe

        whole = RunLevel(
            config, opts.get("fail_on"), opts.get("show_hints"), tuple(opts["exclude"])
        )
        try:
            blocks = [describe(path, tree.for_path(path), overlay, names, whole) for path in files]
        except (ConfigError, SelectionError) as exc:
            return _usage_error(str(exc))
        click.echo("\n".join("".join(f"{line}\n" for line in block) for block in blocks), nl=False)
        return EXIT_CLEAN
    if list(paths) == ["-"]:
        try:
            options = _with_file_options([stdin_name or "-"], options, tree, config, overlay)
        except (ConfigError, SelectionError) as exc:
            return _usage_error(str(exc))
        return _check_stdin(
            stdin_name or "-", options, report_options, fmt, opts["quiet"], opts["exit_zero"]
        )

    excluder = TreeExcluder(tree, opts["exclude"], config.root)
    missing = [p for p in paths if p != "-" and not os.path.exists(p) and not os.path.islink(p)]
    tasks = [DiscoveredFile(p, explicit=True) for p in missing]
    with verbose.timed("discovery", "finding the files to check"):
        tasks += list(
            discover(
                [p for p in paths if p not in missing and p != "-"],
                excluder,
                config.respect_gitignore,
            )
        )
    if verbose.enabled():
        for task in tasks:
            verbose.debug("discovery", f"found {task.path}")
    if output_file is not None and any(_same_file(output_file, task.path) for task in tasks):
        return _usage_error(_CHECKED_OUTPUT.format(output_file))
    if opts.get("show_files"):
        click.echo("".join(f"{path}\n" for path in sorted(task.path for task in tasks)), nl=False)
        return EXIT_CLEAN
    try:
        options = _with_file_options([t.path for t in tasks], options, tree, config, overlay)
    except (ConfigError, SelectionError) as exc:
        return _usage_error(str(exc))
    from smpfix.engine.progress import progress_bar, wanted
    from smpfix.report import MACHINE_FORMATS

    show_bar = wanted(
        len(tasks), fmt in MACHINE_FORMATS or bool(opts.get("add_noqa")), opts["quiet"], sys.stderr
    )
    with progress_bar(len(tasks), show_bar) as advance, verbose.timed("check", "the check"):
        results = list(run(tasks, options, on_result=advance))
    from smpfix.engine.job_table import check_job_table

    # The job table of every configuration a checked file took, checked with that file's rules.
    used = {config.path: (config, codes)}
    for path, own in options.per_file.items():
        file_config = tree.for_path(path)
        used.setdefault(file_config.path, (file_config, own.select))
    for table_config, table_codes in used.values():
        table = check_job_table(table_config, table_codes)
        if table is not None and (table.findings or table.errors):
            results = sorted(
                [*(r for r in results if r.path != table.path), table], key=lambda r: r.path
            )
    if opts.get("add_noqa"):
        from smpfix.report import shown

        # Hints that are not shown are not suppressed either: nobody was asked to judge them.
        return _add_noqa(shown(results, report_options), tasks, options, opts["quiet"])
    return _finish(results, options, report_options, fmt, opts["quiet"], opts["exit_zero"])


def _with_file_options(
    paths: Sequence[str], options: Any, tree: Any, config: Any, overlay: Any
) -> Any:
    """``options`` with the files whose configuration is not the run's, or whom a job override
    concerns, given their own options (raises ``ConfigError``, ``SelectionError``)."""
    from dataclasses import replace

    from smpfix.engine.config_tree import file_options

    by_config: dict[Any, Any] = {}
    per_file: dict[str, Any] = {}
    for path in paths:
        own = tree.for_path(path)
        overridden = bool(own.overrides) and bool(own.overrides_for(path))
        if own.path == config.path and not overridden:
            continue
        if overridden:
            per_file[path] = file_options(path, own, overlay, options.rule_names)
            continue
        if own.path not in by_config:
            by_config[own.path] = file_options(path, own, overlay, options.rule_names)
        per_file[path] = by_config[own.path]
    return replace(options, per_file=per_file) if per_file else options


def _print_settings(
    config: Any, codes: frozenset[str], declared: Sequence[Any], fail_on: Any, show_hints: bool
) -> None:
    """Ruff's ``--show-settings``: what this run would use, after the command line."""
    lines = [
        f"configuration: {config.path if config.path is not None else '(none found)'}",
        f"root: {config.root}",
        f"rules: {', '.join(sorted(codes)) or '(none)'}",
        f"exclude: {', '.join(config.exclude) or '(none)'}",
        f"respect-gitignore: {str(config.respect_gitignore).lower()}",
        f"launchers: {', '.join(config.launchers) or '(searched for)'}",
        f"fail-on: {fail_on.value}",
        f"show-hints: {str(show_hints).lower()}",
    ]
    lines += [
        f"per-file-ignores: {pattern} = {', '.join(ignored)}"
        for pattern, ignored in sorted(config.per_file_ignores.items())
    ]
    for job in declared:
        lines += [f"job ({job.source}): {key} = {value!r}" for key, value in job.settings.items()]
    click.echo("".join(f"{line}\n" for line in lines), nl=False)


def _cli_job(items: Sequence[str]) -> dict[str, Any]:
    """``--job KEY=VALUE`` settings, validated like ``[tool.smpfix.job]`` (raises ConfigError)."""
    from smpfix.engine.config import ConfigError, validate_job
    from smpfix.job.jobfacts import parse_value

    job: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--job expects KEY=VALUE, got {item!r}")
        job[key.strip()] = parse_value(value)
    return validate_job(job, "--job")


def _declared_jobs(cli_job: dict[str, Any], config: Any) -> list[Any]:
    """The declared jobs, highest precedence first: ``--job``, then ``[tool.smpfix]``'s."""
    from smpfix.job.jobfacts import DeclaredJob

    declared = []
    if cli_job:
        declared.append(DeclaredJob.stated("command line --job", cli_job))
    declared.extend(config.declared_jobs())
    return declared


def _cache_dir(root: Path, no_cache: bool, explicit: Optional[str]) -> Optional[Path]:
    """``--cache-dir``, else ``.smpfix_cache`` in the project root; None with ``--no-cache``."""
    if no_cache:
        return None
    from smpfix.engine.cache import CACHE_DIR_NAME  # not imported by a run without a cache

    return Path(explicit) if explicit else root / CACHE_DIR_NAME


def _output_option_problem(fmt: str, opts: Any, stdin: bool) -> Optional[str]:
    """Why the output options cannot be combined, or None."""
    from smpfix.report import STATISTICS_FORMATS

    if opts.get("statistics") and fmt not in STATISTICS_FORMATS:
        return f"--statistics prints text or JSON; it cannot be combined with --format {fmt}"
    if opts.get("add_noqa"):
        if opts["apply"] or opts["diff"]:
            return (
                "--add-noqa cannot be combined with --apply or --diff"
                " (it writes suppressions, not fixes)"
            )
        if stdin:
            return "--add-noqa edits files in place; it cannot read from stdin"
    return None


def _add_noqa(results: Sequence[Any], tasks: Sequence[Any], options: Any, quiet: bool) -> int:
    """Write suppressions for every finding; exit 1 if some cannot be suppressed, 2 on errors."""
    from smpfix.engine.add_noqa import add_to_file
    from smpfix.report.locations import finding_location

    writable = {task.path: task.writable for task in tasks}
    errors = [error for result in results for error in result.errors]
    added = files = 0
    left: list[Any] = []
    for result in results:
        outcome = add_to_file(result, options, writable.get(result.path, True))
        errors.extend(outcome.errors)
        left.extend(outcome.unsuppressed)
        added += outcome.added
        files += bool(outcome.added)
    for error in errors:
        click.echo(f"{error.location}: error: {error.message}", err=True)
    for item in left:
        location = finding_location(item.finding)
        click.echo(f"{location}: {item.finding.code} not suppressed: {item.reason}")
    if not quiet:
        noun = "suppression" if added == 1 else "suppressions"
        click.echo(f"Added {added} {noun} to {files} file{'s' if files != 1 else ''}.", err=True)
    return EXIT_ERROR if errors else (EXIT_FINDINGS if left else EXIT_CLEAN)


def _reaches_through_helpers(name: str, raw: bytes, options: Any) -> bool:
    """A named text that imports a project module naming the library (``helper_reach``)."""
    if name == "-" or not name.endswith(".py"):
        return False
    from smpfix.engine.helper_reach import HelperReach

    return HelperReach(options.project).reaches(name, raw)


def _check_stdin(
    name: str, options: Any, report_options: Any, fmt: str, quiet: bool, exit_zero: bool
) -> int:
    from smpfix.base import source
    from smpfix.base.findings import FileError, FileResult
    from smpfix.engine import prefilter
    from smpfix.engine.runner import check_text

    raw = sys.stdin.buffer.read()
    try:
        src = source.decode(name, raw)
    except source.SourceError as exc:
        result = FileResult(name, errors=(FileError(name, exc.message, exc.line, exc.column),))
        return _finish([result], options, report_options, fmt, quiet, exit_zero)
    if not prefilter.may_involve_smp(raw) and not _reaches_through_helpers(name, raw, options):
        result = FileResult(name)
    else:
        if name != "-":  # a name places the text in its project, whose launchers configure it
            from smpfix.engine.runner import open_cache, with_project

            options = with_project([(name, raw)], options, open_cache(options))
        result = check_text(src.text, name, options)
    if options.apply:
        sys.stdout.write(result.new_text if result.new_text is not None else src.text)
        sys.stdout.flush()
        return _finish([result], options, report_options, fmt, quiet, exit_zero, stream_err=True)
    return _finish([result], options, report_options, fmt, quiet, exit_zero)


def _diff(results: Sequence[Any]) -> str:
    import difflib  # only for --diff: every other run would import it for nothing

    chunks: list[str] = []
    for result in results:
        if result.new_text is None or result.original_text is None:
            continue
        chunks.extend(
            difflib.unified_diff(
                result.original_text.splitlines(keepends=True),
                result.new_text.splitlines(keepends=True),
                fromfile=f"a/{result.path.lstrip('/')}",
                tofile=f"b/{result.path.lstrip('/')}",
            )
        )
    return "".join(line if line.endswith("\n") else line + "\n" for line in chunks)


def _finish(
    results: Sequence[Any],
    options: Any,
    report_options: Any,
    fmt: str,
    quiet: bool,
    exit_zero: bool,
    stream_err: bool = False,
) -> int:
    from smpfix.base.output_file import write_report
    from smpfix.report import MACHINE_FORMATS, render
    from smpfix.report.text import summary

    errors = [error for result in results for error in result.errors]
    for error in errors:
        click.echo(f"{error.location}: error: {error.message}", err=True)
    if options.show_job:
        _print_jobs(results, err=fmt in MACHINE_FORMATS or stream_err)
    if options.diff:
        text = _diff(results)
        if text:
            click.echo(text, nl=False)
        changed = any(r.new_text is not None for r in results)
        if not quiet:
            fixable = sum(r.fixed_count for r in results)
            click.echo(
                f"Would fix {fixable} problem{'s' if fixable != 1 else ''}."
                if changed
                else "No fixes available.",
                err=True,
            )
        return EXIT_ERROR if errors else (EXIT_FINDINGS if changed else EXIT_CLEAN)
    output = render(results, fmt, report_options)
    if report_options.output_file is not None:
        try:
            write_report(report_options.output_file, output.encode("utf-8"))
        except OSError as exc:
            return _usage_error(f"cannot write {report_options.output_file}: {exc.strerror or exc}")
    elif output:
        click.echo(output, nl=False, err=stream_err)
    if report_options.show_fixes and options.apply:
        from smpfix.report.text import fixed_list

        listed = fixed_list(results)
        if listed:
            click.echo(listed, nl=False, err=stream_err or fmt in MACHINE_FORMATS)
    if not quiet and (report_options.output_file is not None or fmt not in MACHINE_FORMATS):
        click.echo(summary(results, report_options), err=stream_err)
    remaining = any(report_options.fails(f) for result in results for f in result.findings)
    if errors:
        return EXIT_ERROR
    if remaining and not exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _print_jobs(results: Sequence[Any], err: bool) -> None:
    from smpfix.report.show_job import render_jobs

    shown = render_jobs(results)
    if shown:
        click.echo(shown, nl=False, err=err)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--job",
    "job_settings",
    multiple=True,
    metavar="KEY=VALUE",
    help=(
        "A job setting that overrides the launchers, e.g. tensor_parallel_degree=8"
        " or model_parameters=20e9."
    ),
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(),
    help=(
        "Use this configuration file (a pyproject.toml or an smpfix.toml) for every file,"
        " instead of each file's closest."
    ),
)
@click.option("--exclude", multiple=True, help="Extra gitignore-style patterns to skip.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when a configuration does not fit.")
@click.option(
    "--no-color",
    is_flag=True,
    help="Disable colours (also NO_COLOR, or when output is not a terminal).",
)
@click.option(
    "--model",
    "model_name",
    metavar="NAME_OR_FILE",
    help=(
        "What fits for this model? A Hugging Face name smpfix knows (EleutherAI/gpt-neox-20b)"
        " or a config.json; with --instance and --nodes, instead of PATHS."
    ),
)
@click.option("--instance", "instance_type", metavar="TYPE", help="With --model: ml.p4d.24xlarge.")
@click.option("--nodes", type=click.IntRange(min=1), help="With --model: the instance count.")
@click.option("--seq", type=click.IntRange(min=1), help="With --model: the sequence length.")
@click.option(
    "--batch", type=click.IntRange(min=1), help="With --model: the global batch of one step."
)
@click.option(
    "--library",
    type=click.Choice(["v1", "v2"]),
    default="v1",
    show_default=True,
    help="With --model: SMP v1 or SMP v2 (FSDP).",
)
@click.option("--layers", type=click.IntRange(min=1), help="A model by shape: its layers.")
@click.option("--hidden", type=click.IntRange(min=1), help="A model by shape: its hidden size.")
@click.option("--heads", type=click.IntRange(min=1), help="A model by shape: attention heads.")
@click.option("--vocab", type=click.IntRange(min=1), help="A model by shape: its vocabulary.")
@click.option(
    "--flash-attention/--no-flash-attention",
    default=None,
    help="With --model: the library's flash attention (default: on where it runs).",
)
def plan(
    paths: tuple[str, ...],
    fmt: str,
    job_settings: tuple[str, ...],
    config_path: Optional[str],
    exclude: tuple[str, ...],
    exit_zero: bool,
    no_color: bool,
    model_name: Optional[str],
    instance_type: Optional[str],
    nodes: Optional[int],
    seq: Optional[int],
    batch: Optional[int],
    library: str,
    layers: Optional[int],
    hidden: Optional[int],
    heads: Optional[int],
    vocab: Optional[int],
    flash_attention: Optional[bool],
) -> None:
    """Will it fit? Estimate the per-GPU memory of every launcher configuration in PATHS, or
    find what fits for a model on a cluster (--model, or --layers --hidden --heads --vocab).

    For each estimator call (and, with --job or [tool.smpfix.job], each training script no
    launcher starts): the parameter count and where it came from, the per-GPU split into
    model states, activations and the rest against the GPU of the instance type, the verdict
    (fits, does not fit, depends on a switch smpfix cannot resolve, or unknown), the
    assumptions, and the smallest changes that make a job fit. It is an estimate: every
    approximation is listed in docs/plan.md
    (https://smpfix.github.io/smpfix/plan/).

    With --model: every configuration of the library that fits on --nodes instances of
    --instance, ranked in the order of the SMP best-practices page (optimizer state sharding,
    activation checkpointing, tensor parallelism within a node, pipeline parallelism across
    nodes, offloading last), the per-GPU table of the first five and the estimator's
    `distribution` argument for the first.

    Exit codes: 0 when nothing is known not to fit (with --model: something fits), 1 when a
    configuration does not fit (with --model: nothing fits), 2 on a usage error.
    """
    from smpfix.plan.model_lookup import Dimensions

    dimensions = Dimensions(layers, hidden, heads, vocab)
    if model_name or dimensions.given:
        if paths or job_settings:
            sys.exit(_usage_error("--model (or a shape) plans no PATHS and takes no --job"))
        sys.exit(
            _what_fits(
                model_name,
                dimensions,
                instance_type,
                nodes,
                seq,
                batch,
                library,
                flash_attention,
                fmt,
                _use_color(no_color),
            )
        )
    given = [
        name
        for name, value in (("--instance", instance_type), ("--nodes", nodes), ("--seq", seq))
        if value is not None
    ]
    if given or batch is not None:
        sys.exit(_usage_error(f"{(given or ['--batch'])[0]} needs --model or a shape"))
    from smpfix.base.safe_read import limit_for, refusal
    from smpfix.engine.planning import plan_files
    from smpfix.job.project import Project
    from smpfix.report.plan import render_plan_json, render_plan_table

    paths = paths or (".",)
    config, declared, tasks = _discovered(paths, config_path, job_settings, exclude)
    for task in tasks:  # a FIFO or a device named on the command line is skipped, and said so
        refused = refusal(task.path, limit_for(task.path))
        if refused is not None:
            click.echo(f"{task.path}: error: {refused}", err=True)
    planned = plan_files(
        tasks,
        Project.of(tuple(paths)),
        declared,
        str(config.path) if config.job and config.path else None,
    )
    if fmt == "json":
        click.echo(render_plan_json(planned), nl=False)
    else:
        click.echo(render_plan_table(planned, _use_color(no_color)), nl=False)
    does_not_fit = any(configuration.plan.fits is False for configuration in planned)
    sys.exit(EXIT_FINDINGS if does_not_fit and not exit_zero else EXIT_CLEAN)


def _what_fits(
    model_name: Optional[str],
    dimensions: Any,
    instance_type: Optional[str],
    nodes: Optional[int],
    seq: Optional[int],
    batch: Optional[int],
    library: str,
    flash_attention: Optional[bool],
    fmt: str,
    color: bool,
) -> int:
    """``smpfix plan --model``: the exit code after printing what fits."""
    from smpfix.job.instances import lookup
    from smpfix.plan.model_lookup import ModelNotFound, choose
    from smpfix.plan.what_fits import Question, answer
    from smpfix.report.plan import render_what_fits_json, render_what_fits_table

    if instance_type is None or nodes is None:
        return _usage_error("--model needs --instance TYPE and --nodes N")
    instance = lookup(instance_type) or lookup(f"ml.{instance_type}")
    if instance is None:
        return _usage_error(f"{instance_type!r} is not an instance type smpfix knows the GPUs of")
    try:
        model = choose(model_name, dimensions)
    except ModelNotFound as problem:
        return _usage_error(str(problem))
    found = answer(Question(model, instance, nodes, seq, batch, library, flash_attention))
    if fmt == "json":
        click.echo(render_what_fits_json(found), nl=False)
    else:
        click.echo(render_what_fits_table(found, color), nl=False)
    return EXIT_CLEAN if found.options else EXIT_FINDINGS


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--apply", is_flag=True, help="Write the migrated files (default: print a diff).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Format of the report.",
)
@click.option(
    "--job",
    "job_settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="A job setting that overrides the launchers, e.g. tensor_parallel_degree=8.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(),
    help="Use this configuration file for every file, instead of each file's closest.",
)
@click.option("--exclude", multiple=True, help="Extra gitignore-style patterns to skip.")
@click.option(
    "--no-color",
    is_flag=True,
    help="Disable colours (also NO_COLOR, or when output is not a terminal).",
)
def migrate(
    paths: tuple[str, ...],
    apply: bool,
    fmt: str,
    job_settings: tuple[str, ...],
    config_path: Optional[str],
    exclude: tuple[str, ...],
    no_color: bool,
) -> None:
    """Move the SMP v1 jobs in PATHS (launchers, scripts, helpers) to SMP v2.

    Prints a unified diff of every file that changes and a report per job: what moved
    mechanically, what smpfix scaffolded with a `# smpfix-migrate: TODO` comment, and what
    only a person can move, each with the v2 page that says how. A job with a blocking item
    (pipeline parallelism, TensorFlow, ...) stays on v1 and only gains TODO comments.
    --apply writes the files. See docs/migrate.md.

    Exit codes: 0 when everything moved, 1 when something needs a person, 2 on a usage error
    or a file that could not be read or parsed (the others are still migrated).
    """
    from smpfix.engine.launcher_index import LauncherSearch
    from smpfix.engine.migration import migrate_files, write_migrated
    from smpfix.job.project import Project
    from smpfix.report.migration import (
        render_migration_json,
        render_migration_text,
        unified_diff,
    )

    paths = paths or (".",)
    config, declared, tasks = _discovered(paths, config_path, job_settings, exclude)
    run = migrate_files(
        tasks, Project.of(tuple(paths)), declared, LauncherSearch.of(config, exclude)
    )
    errors = list(run.errors)
    if apply:
        errors += write_migrated(run, tasks)
    elif fmt != "json":  # the JSON report carries each file's diff
        diff = "".join(unified_diff(file.path, file.before, file.after) for file in run.files)
        if diff:
            click.echo(diff, nl=False)
    for error in errors:
        click.echo(f"{error.location}: error: {error.message}", err=True)
    if fmt == "json":
        click.echo(render_migration_json(run), nl=False)
    else:
        click.echo(render_migration_text(run, _use_color(no_color)), nl=False)
    if errors:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if run.needs_a_person else EXIT_CLEAN)


@main.command()
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def rules(fmt: str) -> None:
    """List every rule: code, name, fix availability and safety, SMP versions, the library
    flavours whose scripts it checks, job settings it depends on (a table as wide as the
    terminal, 100 columns in a pipe)."""
    from smpfix.report.rules_table import render_rules_table
    from smpfix.rules.registry import rule_table

    table = rule_table()
    if fmt == "json":
        click.echo(json.dumps(table, indent=2))
        return
    click.echo(render_rules_table(table), nl=False)


@main.command()
@click.argument("rule")
def explain(rule: str) -> None:
    """Print the page of RULE (a code such as SMP101, or a rule name)."""
    from smpfix.rules.pages import read_page
    from smpfix.rules.registry import find_rule

    found = find_rule(rule)
    if found is None:
        click.echo(f"smpfix: error: unknown rule {rule!r}; `smpfix rules` lists them", err=True)
        sys.exit(EXIT_ERROR)
    page = read_page(found["code"])
    if page is None:
        click.echo(
            f"smpfix: error: the page of {found['code']} is missing from this installation",
            err=True,
        )
        sys.exit(EXIT_ERROR)
    click.echo(page, nl=not page.endswith("\n"))


@main.command()
@click.option(
    "--stdio",
    is_flag=True,
    help="Talk over stdin and stdout (the only transport; accepted for clients that pass it).",
)
def server(stdio: bool) -> None:
    """Run the language server (LSP over stdio) for editors: findings as you type, quick fixes."""
    from importlib.util import find_spec

    if find_spec("pygls") is None or find_spec("lsprotocol") is None:
        click.echo(
            "smpfix: error: the language server needs extra packages: pip install 'smpfix[server]'",
            err=True,
        )
        sys.exit(EXIT_ERROR)
    from smpfix.server.app import serve

    sys.exit(serve())


@main.command()
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    envvar="SMPFIX_CACHE_DIR",
    help="The cache to remove (default: .smpfix_cache in the project root).",
)
def clean(cache_dir: Optional[str]) -> None:
    """Remove the result cache of the project in the current folder."""
    from smpfix.engine import cache, config

    if cache_dir is None:
        found = config.find(["."])
        cache_dir = str((found.parent if found is not None else Path.cwd()) / cache.CACHE_DIR_NAME)
    removed = cache.clean(cache_dir)
    if os.path.exists(cache_dir):
        click.echo(
            f"Removed {removed} cached result{'s' if removed != 1 else ''};"
            f" {cache_dir} holds other files and was kept."
        )
    else:
        click.echo(f"Removed {removed} cached result{'s' if removed != 1 else ''} ({cache_dir}).")
