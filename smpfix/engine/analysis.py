"""From source text to findings: parse once, collect facts once, walk once for all rules.

This is the only place that turns a syntax error or a crashing rule into a diagnostic; the
rules themselves may assume a parsed tree. Positions are computed only when a rule reported
something (or job evidence must be quoted with its line), since on most files nothing is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import libcst as cst

from smpfix.base import cpython, nesting
from smpfix.base.edits import NodeEdit, ReplaceArgument, ReplaceNode, UnwrapIf
from smpfix.base.findings import (
    Applicability,
    Edit,
    FileError,
    Finding,
    Fix,
    JobFactUse,
    fit_title,
)
from smpfix.base.flavour import Flavour
from smpfix.base.parse import parse_module
from smpfix.base.positions import Positions
from smpfix.base.walker import Ancestry, Dispatch, NodeIndex, active_index, indexed, walk
from smpfix.fixes.comments import reviewed, tied_comments
from smpfix.job.jobfacts import DeclaredJob, Evidence, JobFacts, Role
from smpfix.job.linking import shown_path
from smpfix.job.project import Project
from smpfix.job.project_root import project_root
from smpfix.program.facts import FileFacts, collect
from smpfix.program.flow.built_init import built_init_config
from smpfix.program.model import Program
from smpfix.program.project.local_modules import SHARED_STORE, LocalModules
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.rules.config_rule import FileLaunchers
from smpfix.rules.registry import rule_codes, rules_for
from smpfix.rules.rule import Report, Rule
from smpfix.suppressions import comments as suppression
from smpfix.suppressions import unused as unused_suppressions

_RECURSION_LIMIT = 20_000


@dataclass(frozen=True)
class AnalysisOptions:
    """What to check: enabled rule codes and the declared job, highest precedence first."""

    select: frozenset[str]
    declared_jobs: tuple[DeclaredJob, ...] = ()
    # The checked project (roots, launcher-declared jobs); None when checking a lone text.
    project: Optional[Project] = None
    # Rules defined outside ``smpfix.rules`` (a test's probe, a plugin), run with the others.
    extra_rules: tuple[type[Rule], ...] = ()
    # The line length fixes keep within (``line-length``; ``smpfix.base.edits``).
    line_length: int = 100


@dataclass(frozen=True)
class Analysis:
    findings: tuple[Finding, ...] = ()
    errors: tuple[FileError, ...] = ()
    job: Optional[JobFacts] = None
    imports_smp: bool = False
    used_suppressions: tuple[suppression.Suppression, ...] = field(default=())
    suppressions: tuple[suppression.Suppression, ...] = field(default=())
    # Each used suppression with the code it silenced (SMP900 judges codes one by one).
    used_codes: tuple[tuple[suppression.Suppression, str], ...] = field(default=())
    # Other files the analysis looked for or read (sibling modules); the cache checks them.
    dependencies: tuple[str, ...] = field(default=())


class _LazyPositions:
    def __init__(
        self,
        module: cst.Module,
        text: str,
        index: Optional[NodeIndex] = None,
        line_length: int = 100,
    ) -> None:
        self.module = module
        self.text = text
        self.index = index
        self.line_length = line_length
        self._positions: Optional[Positions] = None

    def get(self) -> Positions:
        if self._positions is None:
            self._positions = Positions(self.module, self.text, self.index, self.line_length)
        return self._positions


def parse(text: str, path: str) -> tuple[Optional[cst.Module], Optional[FileError]]:
    """Parse with LibCST; a syntax error or too-deep nesting becomes one clear diagnostic."""
    deep = nesting.refusal(text)  # LibCST's native parser would crash the process, not raise
    if deep is not None:
        return None, FileError(path, deep.message, deep.line, deep.column)
    previous = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(max(previous, _RECURSION_LIMIT))
        return parse_module(text), None
    except cst.ParserSyntaxError as exc:
        reason = str(exc.message).strip().splitlines()[0] if exc.message else "invalid syntax"
        line, column = exc.raw_line, exc.raw_column + 1
        python = _python_syntax_error(text)
        if python is not None:
            # CPython's parser names the position and the reason better than LibCST's; it
            # only parses (``ast.parse`` never runs anything).
            reason, line, column = python
        return None, FileError(path, f"syntax error: {reason}", line, column)
    except RecursionError:
        return None, FileError(path, "code is nested too deeply to analyze")
    except (MemoryError, ValueError) as exc:
        return None, FileError(path, f"cannot parse: {exc}")
    except Exception as exc:  # e.g. CSTLogicError on syntax newer than this LibCST knows
        return None, FileError(
            path,
            f"cannot parse: LibCST rejects this code ({type(exc).__name__}: {exc});"
            " it may use syntax from a newer Python",
        )
    finally:
        sys.setrecursionlimit(previous)


def _python_syntax_error(text: str) -> Optional[tuple[str, int, int]]:
    try:
        cpython.parse(text)
    except SyntaxError as exc:
        return (exc.msg or "invalid syntax", exc.lineno or 1, exc.offset or 1)
    except (ValueError, RecursionError, MemoryError):
        return None
    return None


def job_facts_for(
    facts: FileFacts,
    declared: Sequence[DeclaredJob],
    positions: _LazyPositions,
    script_v2: Optional[str] = None,
    modules: Optional[LocalModules] = None,
) -> JobFacts:
    sources = list(declared)
    run_by = _run_by(declared)
    if facts.init_config_call is not None and facts.init_config:
        line = positions.get().position(positions.get().span(facts.init_config_call)[0]).line
        sources.append(
            DeclaredJob(
                f"smp.init({{...}}) at line {line}{run_by}",
                facts.init_config,
                complete=False,
                role=Role.INIT_DICT,
            )
        )
    elif (
        facts.init_config_call is None
        and all(facts.imports.through_alias(call.func) for call in facts.smp_init_calls)
        and modules is not None
    ):
        # SMP set up by the project's own helper (``init_distributed(args)`` in dist_utils.py,
        # which the facts may read as the ``smp.init`` it calls): the one configuration dict
        # of the modules the script imports is the script's.
        helpers = [
            linked
            for linked in modules.imported_modules(facts)
            if linked.facts.init_config_call is not None and linked.facts.init_config
        ]
        if len(helpers) == 1:
            sources.append(
                DeclaredJob(
                    f"smp.init({{...}}) in {os.path.basename(helpers[0].path)}{run_by}",
                    helpers[0].facts.init_config,
                    complete=False,
                    role=Role.INIT_DICT,
                )
            )
    evidence = [
        Evidence(
            item.feature,
            item.description,
            positions.get().position(positions.get().span(item.node)[0]).line,
            item.strong,
        )
        for item in facts.evidence
    ]
    return JobFacts.resolve(
        sources, evidence, Flavour.TENSORFLOW if facts.is_tensorflow else None, script_v2
    )


def script_job(
    file: ParsedFile, declared: Sequence[DeclaredJob], modules: Optional[LocalModules]
) -> JobFacts:
    """The job of ``file`` as its check sees it (``declared``: the stated and launcher jobs,
    highest precedence first), for front ends that ask the program model without the rules
    (``smpfix migrate``)."""
    facts = file.facts
    script_v2 = "this file imports torch.sagemaker" if facts.imports_smp_v2 else None
    if not facts.imports_smp:
        return JobFacts.resolve(declared, script_v2=script_v2)
    positions = _LazyPositions(file.module, file.text, file.index)
    return job_facts_for(facts, declared, positions, script_v2, modules)


def analyze(
    text: str,
    path: str,
    options: AnalysisOptions,
    parsed: Optional[tuple[Optional[cst.Module], Optional[FileError]]] = None,
    index: Optional[NodeIndex] = None,
) -> Analysis:
    """``parsed``: what ``parse`` gives for ``text``, when the caller has it (the language
    server parses an edited document again piece by piece); ``index``: its node index, when
    the caller has it too."""
    # A helper module some script of this run imported is already parsed, with its facts.
    stored = SHARED_STORE.parsed(path, text)
    module = stored.module if stored is not None else None
    if module is None:
        module, error = parsed if parsed is not None else parse(text, path)
        if module is None:
            assert error is not None
            return Analysis(errors=(error,))
    # LibCST's code generation (positions, ``code_for_node``) recurses once or twice per
    # nesting level; ``nesting`` bounds the depth, this lets Python follow it.
    previous = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(max(previous, _RECURSION_LIMIT))
        return analyze_module(module, text, path, options, stored, index)
    except RecursionError:
        return Analysis(errors=(FileError(path, "code is nested too deeply to analyze"),))
    finally:
        sys.setrecursionlimit(previous)


def analyze_module(
    module: cst.Module,
    text: str,
    path: str,
    options: AnalysisOptions,
    stored: Optional[ParsedFile] = None,
    index: Optional[NodeIndex] = None,
) -> Analysis:
    # Indexed once: the facts walk and the rules walk replay the index, and the rules'
    # subtree searches are slices of it (see ``walker``).
    with indexed(module, stored.index if stored is not None else index) as index:
        project = options.project or Project()
        if stored is not None:
            file = stored
        else:
            try:
                file = ParsedFile(path, text, module, collect(module), index)
            except RecursionError:
                return Analysis(errors=(FileError(path, "code is nested too deeply to analyze"),))
            SHARED_STORE.offer(file, launched=bool(project.launchers_of(path)))
        return _analyze_file(file, options, project)


def _analyze_file(file: ParsedFile, options: AnalysisOptions, project: Project) -> Analysis:
    modules = LocalModules(project, file.path)
    file = _through_wrappers(file, modules)
    path, text, facts = file.path, file.text, file.facts
    positions = _LazyPositions(file.module, text, file.index, options.line_length)
    script_v2 = "this file imports torch.sagemaker" if facts.imports_smp_v2 else None
    # Whether ``--show-job`` shows this file's job: it imports SMP v1 or SMP v2.
    imports_either = facts.imports_smp or facts.imports_smp_v2
    declared = (
        *options.declared_jobs,
        *(
            project.declared_for(path)
            or _importers_job(path, project, modules, facts)
            or project.container_for(path)
        ),
    )
    built, built_from = _built_init_dict(file, modules, project, declared, positions)
    declared = (*declared, *built)
    job = (
        job_facts_for(facts, declared, positions, script_v2, modules)
        if facts.imports_smp
        else JobFacts.resolve(declared, script_v2=script_v2)
    )
    # Each job gets its library's rules: an SMP v2 job or script no v1 rule, an SMP v1 one no
    # v2 rule; the rules about mixing the two up check both (``smpfix.job.smp_v2``).
    selected = [
        *rules_for(options.select, facts),
        *(rule for rule in options.extra_rules if rule.code in options.select),
    ]
    v2_job = job.smp_v2 is not None
    rule_types = [rule for rule in selected if rule.runs_on(v2_job) and rule.applies_to(facts)]
    checks_unused = any(rule.code == unused_suppressions.CODE for rule in rule_types)
    rule_types = [rule for rule in rule_types if rule.code != unused_suppressions.CODE]
    dependencies = (*modules.consulted(), *_read_by_launchers(file), *built_from)
    if not rule_types and not checks_unused:
        return Analysis(job=job, imports_smp=imports_either, dependencies=dependencies)
    own = (
        _run_rules(Program(file, job, modules), positions, rule_types)
        if rule_types
        else Analysis(job=job)
    )
    helper_rules = [rule for rule in rule_types if rule.runs_on_helper_modules]
    findings = [_through_aliases(finding, facts) for finding in own.findings]
    errors = [*own.errors, *_refused_parameters(file, positions)]
    if checks_unused:
        findings = sorted(
            [*findings, *_unused_suppressions(text, path, own, rule_types, options.select, facts)],
            key=lambda f: f.sort_key,
        )
    if helper_rules and facts.imports_smp and options.project is not None:
        for helper in modules.imported_modules(facts):
            if helper.facts.imports_smp:
                continue
            shown = helper.renamed(_shown_like(helper.path, path))
            helper_positions = _LazyPositions(
                helper.module, helper.text, helper.index, options.line_length
            )
            with indexed(helper.module, helper.index):
                found = _run_rules(
                    Program(shown, job, modules, (file,)), helper_positions, helper_rules
                )
            findings.extend(_on_behalf_of(finding, path) for finding in found.findings)
            errors.extend(found.errors)
    return Analysis(
        tuple(findings),
        tuple(errors),
        job,
        imports_either,
        own.used_suppressions,
        own.suppressions,
        own.used_codes,
        dependencies=(*modules.consulted(), *_read_by_launchers(file), *built_from),
    )


def _through_wrappers(file: ParsedFile, modules: LocalModules) -> ParsedFile:
    """``file`` with facts that read the project's wrappers of the library as the library
    (``library_wrappers``), when it uses such wrappers (also beside the library's own calls:
    ``model = wrap_model(model)`` in a script that imports ``smp`` for its step); else
    ``file`` as it is. Its own parse stays the shared one: only these facts, which depend on
    the helpers, are the analysis's own."""
    facts = file.facts
    if facts.imports_smp_v2 or facts.estimator_calls or not facts.imports.bindings:
        return file
    from smpfix.program.objects.library_wrappers import library_reach

    reach = library_reach(facts, modules)
    if not reach.aliases and all(facts.imports.imports_module(m) for m in reach.modules):
        return file  # it imports every library module it reaches: the same facts again
    facts = collect(file.module, reach.aliases, reach.modules)
    return ParsedFile(file.path, file.text, file.module, facts, file.index)


def _through_aliases(finding: Finding, facts: FileFacts) -> Finding:
    """A finding that names a library member the file reaches through a project wrapper
    (``smp.DistributedModel`` for ``wrap_model(model)``) says which wrapper it read as it."""
    aliases = facts.imports.aliases
    if not aliases:
        return finding
    text = " ".join((finding.message, finding.explanation))
    read = [
        f"`{wrapper}` is read as `smp.{target.rsplit('.', 1)[1]}` (the library call it makes)"
        for wrapper, target in sorted(aliases.items())
        if f"smp.{target.rsplit('.', 1)[1]}" in text
    ]
    return replace(finding, evidence=(*finding.evidence, *read)) if read else finding


def _read_by_launchers(file: ParsedFile) -> list[str]:
    """The configuration files the file's estimator calls read (``json.load(open(...))``, a
    ``parameters`` file): a cached result of the launcher is stale when one changes."""
    if not file.facts.estimator_calls:
        return []
    found = {
        path for launcher in file.answer(FileLaunchers).launchers for path in launcher.files_read()
    }
    return sorted(found)


def _run_by(declared: Sequence[DeclaredJob]) -> str:
    """``, run by launcher x.sh:4`` for a script a launch chain starts without configuring it
    (``python run.py`` from a shell script a notebook runs): its ``smp.init`` dict configures
    the job, and its source says where the script was started from."""
    started = next(
        (job for job in declared if job.role is Role.LAUNCHER and not job.configures), None
    )
    return f", run by {started.source}" if started is not None else ""


def _built_init_dict(
    file: ParsedFile,
    modules: LocalModules,
    project: Project,
    declared: Sequence[DeclaredJob],
    positions: _LazyPositions,
) -> tuple[tuple[DeclaredJob, ...], tuple[str, ...]]:
    """The dict the script passes to ``smp.init`` when it builds it (``config =
    yaml.safe_load(open(args.config))``; ``smpfix.program.flow.built_init``), as the script's
    own configuration, and the files it was read from (a cached result depends on them)."""
    if not file.facts.imports_smp or file.facts.init_config_call is not None:
        return (), ()
    found = built_init_config(file, modules, project.launchers_of(file.path))
    if found is None:
        return (), ()
    call, built = found
    line = positions.get().position(positions.get().span(call)[0]).line
    read = "".join(f", read from {shown_path(path, project_root(path))}" for path in built.files)
    job = DeclaredJob(
        f"smp.init(...) at line {line}{read}{_run_by(declared)}",
        built.settings,
        complete=False,
        role=Role.INIT_DICT,
    )
    return (job,), built.files


def _importers_job(
    path: str, project: Project, modules: LocalModules, facts: FileFacts
) -> tuple[DeclaredJob, ...]:
    """The job of the launched scripts that import this module, for a helper module no
    launcher starts (``dis_util.py`` beside the ``main.py`` a notebook launches, or
    ``trainer/distributed.py`` below the ``train.py`` that imports it through its package):
    the helper runs in their processes, with their configuration. Only when those scripts all
    have one job; else none. Read only when a launcher starts a script in the module's folder
    or a folder above it."""
    folder = os.path.dirname(os.path.abspath(path))
    if not facts.imports_smp or not any(_holds(os.path.dirname(s), folder) for s in project.links):
        return ()
    launched = modules.launched_importers(path)
    jobs = [_launched_job(importer, project) for importer in launched]
    if not jobs or any(job != jobs[0] for job in jobs[1:]):
        return ()
    name = os.path.basename(launched[0].path)
    return tuple(
        replace(job, source=f"{job.source}, the job of {name}, which imports it") for job in jobs[0]
    )


def _launched_job(importer: ParsedFile, project: Project) -> tuple[DeclaredJob, ...]:
    """The job a launched script runs: its launchers', and its own ``smp.init`` dict when
    they do not configure it (a launch chain's ``python run.py``)."""
    declared = project.declared_for(importer.path)
    facts = importer.facts
    if any(job.configures for job in declared) or not facts.init_config:
        return declared
    started = f", run by {declared[0].source}" if declared else ""
    name = os.path.basename(importer.path)
    own = DeclaredJob(
        f"smp.init({{...}}) in {name}{started}",
        facts.init_config,
        complete=False,
        role=Role.INIT_DICT,
    )
    return (*declared, own)


def _holds(folder: str, inner: str) -> bool:
    """Whether ``inner`` is ``folder`` or a folder below it."""
    return inner == folder or inner.startswith(folder + os.sep)


def _refused_parameters(file: ParsedFile, positions: _LazyPositions) -> list[FileError]:
    """A launcher's parameters file that was not read (a FIFO, a device, outside the
    project, too large): one line at the estimator call; its values count as unknown."""
    if not file.facts.estimator_calls:
        return []
    errors = []
    for launcher in file.answer(FileLaunchers).launchers:
        if launcher.parameters_refusal is not None:
            at = positions.get().position(positions.get().span(launcher.call)[0])
            errors.append(FileError(file.path, launcher.parameters_refusal, at.line, at.column))
    return errors


def _unused_suppressions(
    text: str,
    path: str,
    own: Analysis,
    ran: Sequence[type[Rule]],
    select: frozenset[str],
    facts: FileFacts,
) -> list[Finding]:
    """SMP900: the file's suppression comments, judged once every other rule has reported."""
    by_line = dict(suppression.parse(text))
    file_level, problems = suppression.parse_file_level(text, rule_codes())
    if any(item.covers(unused_suppressions.CODE) for item in file_level):
        return []  # ``ignore-file[SMP900]``: the file's comments are not judged
    for item in file_level:
        by_line[item.line] = (*by_line.get(item.line, ()), item)
    if not by_line and not problems:
        return []
    failed = {error.code for error in own.errors if error.code is not None}
    use = unused_suppressions.suppression_use(
        own.used_codes,
        ran=[rule.code for rule in ran if rule.code not in failed],
        known=rule_codes(),
        enabled=select - failed,
        imports_smp=facts.imports_smp,
    )
    return [
        *unused_suppressions.unused_suppression_findings(text, path, by_line, use),
        *unused_suppressions.file_level_problem_findings(problems, path),
    ]


def _shown_like(helper: str, script: str) -> str:
    """The helper module's path written the way the script's is: relative to the working folder
    when the script was named relatively (``src/model.py`` beside ``src/train.py``)."""
    if os.path.isabs(script) or not os.path.isabs(helper):
        return helper
    shown = os.path.relpath(helper)
    return helper if shown.startswith(os.pardir) else shown


def _on_behalf_of(finding: Finding, script: str) -> Finding:
    """A finding in a helper module, found while checking ``script``: reported, not auto-fixed.

    The script's worker must not write another file (another script may import it too), so
    the fix is shown for a person to apply.
    """
    fix = finding.fix
    if fix is not None:
        fix = replace(fix, applicability=Applicability.DISPLAY_ONLY)
    return replace(
        finding,
        evidence=(f"found while checking {script}, which imports this module", *finding.evidence),
        fix=fix,
    )


def _run_rules(
    program: Program, positions: _LazyPositions, rule_types: Sequence[type[Rule]]
) -> Analysis:
    """One walk of the program's file with every rule; reports become findings, minus
    suppressed ones."""
    path, facts, job = program.path, program.facts, program.job
    ancestry = Ancestry()
    rules: list[Rule] = [rule_type(program, ancestry) for rule_type in rule_types]
    errors: list[FileError] = []
    failed: set[str] = set()

    def on_error(handler: Any, exc: BaseException) -> None:
        code = getattr(getattr(handler, "__self__", None), "code", None) or "?"
        if code not in failed:
            failed.add(code)
            errors.append(
                FileError(
                    path, f"internal error in rule {code}: {type(exc).__name__}: {exc}", code=code
                )
            )

    walk(program.module, Dispatch(rules), ancestry, on_error)
    reports = [report for rule in rules if rule.code not in failed for report in rule.reports]
    if not reports:
        return Analysis(errors=tuple(errors), job=job, imports_smp=facts.imports_smp)

    by_line = suppression.parse(program.file.text)
    file_level = suppression.parse_file_level(program.file.text, rule_codes())[0]
    findings: list[Finding] = []
    used: list[suppression.Suppression] = []
    used_codes: list[tuple[suppression.Suppression, str]] = []
    names = {rule.code: rule.name for rule in rule_types}
    for report in reports:
        try:
            finding = _finding(report, names[report.code], path, positions.get(), facts)
        except Exception as exc:
            errors.append(
                FileError(
                    path,
                    f"internal error in rule {report.code}: {type(exc).__name__}: {exc}",
                    code=report.code,
                )
            )
            continue
        lines = (finding.start.line, _statement_line(report.node, facts, positions.get()))
        hit = suppression.find(by_line, finding.code, lines) or next(
            (item for item in file_level if item.covers(finding.code)), None
        )
        if hit is not None:
            used.append(hit)
            used_codes.append((hit, finding.code))
            continue
        findings.append(finding)
    mismatch = positions.get().mismatch
    if mismatch is not None:
        where = positions.get().position(mismatch)
        reason = (
            "LibCST does not reproduce this file exactly here (a form feed, a backslash"
            " continuation in indentation or a lone CR); not analyzed, so that no fix can edit"
            " the wrong characters"
        )
        return Analysis(
            errors=(*errors, FileError(path, reason, where.line, where.column)),
            job=job,
            imports_smp=facts.imports_smp,
        )
    findings.sort(key=lambda f: f.sort_key)
    all_suppressions = (*(item for items in by_line.values() for item in items), *file_level)
    return Analysis(
        tuple(findings),
        tuple(errors),
        job,
        facts.imports_smp,
        tuple(used),
        all_suppressions,
        tuple(used_codes),
    )


def _statement_lines(node: cst.CSTNode, facts: FileFacts, positions: Positions) -> tuple[int, int]:
    """The first and last line of the innermost statement holding ``node`` (the node's own
    lines when the tree has no index); only that statement is located, as for the node."""
    index = active_index(positions.module)
    at = index.positions.get(id(node)) if index is not None else None
    holder = node
    if index is not None and at is not None and index.order[at] is node:
        while at >= 0 and index.order[at] not in facts.statements:
            at = index.parents[at]
        holder = index.order[at] if at >= 0 else node
    start, end = positions.span(holder)
    return positions.position(start).line, positions.position(max(start, end - 1)).line


def _statement_line(node: cst.CSTNode, facts: FileFacts, positions: Positions) -> int:
    """The first line of the innermost statement holding ``node`` (suppressions may sit there)."""
    index = active_index(positions.module)
    at = index.positions.get(id(node)) if index is not None else None
    if index is not None and at is not None and index.order[at] is node:
        while at >= 0 and index.order[at] not in facts.statements:
            at = index.parents[at]
        return positions.position(positions.span(index.order[at] if at >= 0 else node)[0]).line
    start, end = positions.span(node)
    best: Optional[tuple[int, int]] = None
    for statement in facts.statements:
        s_start, s_end = positions.span(statement)
        if (
            s_start <= start
            and end <= s_end
            and (best is None or s_end - s_start < best[1] - best[0])
        ):
            best = (s_start, s_end)
    return positions.position(best[0] if best is not None else start).line


def _finding(
    report: Report, name: str, path: str, positions: Positions, facts: FileFacts
) -> Finding:
    start, end = positions.span(report.node)
    fix: Optional[Fix] = None
    if report.fix is not None:
        edits = _resolved(report.fix.edits, positions)
        applicability, description = reviewed(
            report.fix.applicability,
            report.fix.description,
            _comments_on_rewrites(report.fix.edits, facts, positions),
        )
        fix = Fix(applicability, description, edits)
    uses = tuple(
        JobFactUse(state.feature.key, state.state.value, state.source) for state in report.job_facts
    )
    title, explanation = fit_title(report.message, report.explanation)
    settings = tuple(
        f"{state.feature.title}: {'offered' if state.offered else state.state.value}"
        f" ({state.source})"
        for state in report.job_facts
    )
    return Finding(
        code=report.code,
        name=name,
        message=title,
        path=path,
        start=positions.position(start),
        end=positions.position(end),
        severity=report.severity,
        fix=fix,
        job_facts=uses,
        explanation=explanation,
        evidence=(*report.evidence, *settings),
    )


def _resolved(edits: Sequence[NodeEdit], positions: Positions) -> tuple[Edit, ...]:
    """A fix's edits as text edits, in file order. A replacement may wrap the call around it
    when its line grows too long (``smpfix.base.edits``); when two edits of one fix would then
    overlap (two values rewritten in one call), the replacements are written unwrapped."""
    resolved = sorted((edit.resolve(positions) for edit in edits), key=lambda e: (e.start, e.end))
    if any(first.overlaps(second) for first, second in zip(resolved, resolved[1:])):
        resolved = sorted(
            (
                edit.unwrapped(positions)
                if type(edit) is ReplaceNode or type(edit) is ReplaceArgument
                else edit.resolve(positions)
                for edit in edits
            ),
            key=lambda e: (e.start, e.end),
        )
    return tuple(resolved)


def _comments_on_rewrites(
    edits: Sequence[NodeEdit], facts: FileFacts, positions: Positions
) -> tuple[int, ...]:
    """The prose comments tied to code the fix rewrites in place (``smpfix.fixes.comments``)."""
    lines = positions.text.splitlines()
    found: set[int] = set()
    for edit in edits:
        if type(edit) is ReplaceNode or type(edit) is ReplaceArgument:
            node: cst.CSTNode = edit.node
        elif type(edit) is UnwrapIf:
            node = edit.statement.test
        else:
            continue
        start, end = positions.span(node)
        first = positions.position(start).line
        last = positions.position(max(start, end - 1)).line
        found.update(tied_comments(lines, first, last, _statement_lines(node, facts, positions)))
    return tuple(sorted(found))
