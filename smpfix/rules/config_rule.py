"""Job-configuration rules (SMP8xx): one check, three places a configuration is written.

A configuration mistake is the same mistake in a launcher's ``distribution``, in the dict a
script passes to ``smp.init({...})``, and in ``[tool.smpfix.job]``. A ``ConfigRule`` checks a
``ConfigView`` and yields ``ConfigProblem``s that point at a value (``Located``); this module
turns them into findings at the offending dict entry for launchers and scripts, and into
findings at the key's line for ``pyproject.toml``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Optional

import libcst as cst

from smpfix.base.edits import AppendElement, NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.flavour import BOTH, Flavour
from smpfix.base.literals import UNKNOWN
from smpfix.job.config_entries import renamed_key
from smpfix.job.config_keys import OLDEST_PUBLISHED_SCHEMA, misspelled
from smpfix.job.framework_versions import launcher_flavour, launcher_smp_version
from smpfix.job.instances import InstanceType, lookup
from smpfix.job.jobfacts import (
    TF_FIXED,
    V2_KNOWN_KEYS,
    V2_LIBRARY_DEFAULTS,
    InitDict,
    known_keys,
    library_defaults,
    normalize_key,
)
from smpfix.job.launcher import Launcher, Located, evaluate_argument, find_launchers
from smpfix.job.smp_v2 import launcher_v2
from smpfix.job.versions import SmpVersion, Version, condition
from smpfix.program.model import Program
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.rules.launched_code import launched_code
from smpfix.rules.rule import PendingFix, Rule
from smpfix.rules.scope import FileScope


@dataclass(frozen=True)
class Replicas:
    """Why a job runs more than one model replica, in words for a message, and whether that is
    certain or depends on an instance count smpfix cannot read."""

    words: str
    certain: bool


@dataclass(frozen=True)
class ConfigView:
    """One configuration to check.

    ``complete`` says whether keys left out mean the library's defaults (a launcher's literal
    ``parameters`` dict, the ``[tool.smpfix.job]`` table) or may still be set elsewhere (an
    ``smp.init`` dict, which the launcher overrides).
    """

    kind: str
    where: str
    parameters: Optional[Located]
    complete: bool
    anchor: Optional[cst.CSTNode] = None
    launcher: Optional[Launcher] = None
    extra: Mapping[str, Located] = field(default_factory=dict)
    # The library version this configuration runs with: the one the user declared (--job,
    # pyproject.toml) or, for a launcher, its container's; for an smp.init dict, the job's.
    smp_version: Optional[SmpVersion] = None
    # Which flavour's schema and defaults the configuration is judged against: a TensorFlow
    # launcher's, a TensorFlow script's ``smp.init`` dict, or a job table saying
    # ``framework = "tensorflow"``.
    flavour: Flavour = Flavour.PYTORCH
    # An SMP v2 configuration (a launcher that starts SMP v2, a ``tsm.init`` dict), judged
    # against SMP v2's schema and defaults by the SMP v2 family alone (``config_views`` holds
    # the SMP v1 ones).
    v2: bool = False

    @property
    def tensorflow(self) -> bool:
        return self.flavour is Flavour.TENSORFLOW and not self.v2

    @property
    def known_keys(self) -> frozenset[str]:
        return V2_KNOWN_KEYS if self.v2 else known_keys(self.flavour)

    @property
    def defaults(self) -> Mapping[str, Any]:
        """What the library uses for a key a complete configuration leaves out."""
        return V2_LIBRARY_DEFAULTS if self.v2 else library_defaults(self.flavour)

    def spelled(self, key: str) -> str:
        """How this flavour writes a setting: TensorFlow knows the pipeline degree only as
        ``partitions``."""
        return "partitions" if key == "pipeline_parallel_degree" and self.tensorflow else key

    def version_condition(
        self, since: Optional[Version] = None, until: Optional[Version] = None
    ) -> str:
        """Words for a message about this configuration's library version
        (``versions.condition``)."""
        return condition(self.smp_version, since, until)

    @property
    def schema_unpublished(self) -> bool:
        """The configuration runs a library older than the oldest published schema, whose keys
        and types smpfix does not know for certain."""
        return self.smp_version is not None and self.smp_version.before(OLDEST_PUBLISHED_SCHEMA)

    def located(self, key: str) -> Optional[Located]:
        if self.parameters is None:
            return None
        found = self.parameters.get(key)
        if found is None and key == "pipeline_parallel_degree":
            found = self.parameters.get("partitions")
        return found

    def value(self, key: str) -> Any:
        """The key's value; the library default when left out of a complete configuration;
        UNKNOWN when smpfix cannot know it, or when an unknown key probably misspells it
        (SMP812 reports that; reasoning from the default would report the typo again)."""
        if self.tensorflow and key in TF_FIXED:
            return TF_FIXED[key]
        found = self.located(key)
        if found is not None:
            return found.plain()
        if self.parameters is None or not isinstance(self.parameters.value, dict):
            return UNKNOWN
        if normalize_key(key) in self._misspelled:
            return UNKNOWN
        return self.defaults.get(key, None) if self.complete else UNKNOWN

    @cached_property
    def _misspelled(self) -> frozenset[str]:
        assert self.parameters is not None
        return misspelled(
            (key for key in self.parameters.value if isinstance(key, str)), self.known_keys
        )

    def int_value(self, key: str) -> Optional[int]:
        """An int setting's value, or None when unknown or not an int (a type rule reports that)."""
        value = self.value(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def launch(self, key: str) -> Any:
        """``instance_type``, ``instance_count``, ``processes_per_host``: UNKNOWN when not
        stated."""
        found = self.extra.get(key)
        return found.plain() if found is not None else UNKNOWN

    @property
    def instance(self) -> Optional[InstanceType]:
        return lookup(self.launch("instance_type"))

    @property
    def world(self) -> Optional[int]:
        per_host, count = self.launch("processes_per_host"), self.launch("instance_count")
        if (
            isinstance(per_host, int)
            and isinstance(count, int)
            and not isinstance(per_host, bool)
            and not isinstance(count, bool)
        ):
            return per_host * count
        return None

    @property
    def replicas(self) -> Optional[int]:
        """How many model replicas the job has (processes ÷ (pipeline × tensor degree)), when
        smpfix knows all three and the degrees divide the processes (SMP801 reports otherwise)."""
        world = self.world
        pp, tp = (
            self.int_value("pipeline_parallel_degree"),
            self.int_value("tensor_parallel_degree"),
        )
        if world is None or pp is None or tp is None or pp < 1 or tp < 1 or world % (pp * tp):
            return None
        return world // (pp * tp)

    @property
    def several_replicas(self) -> Optional[Replicas]:
        """The job runs more than one model replica (so it needs a data-parallel backend): known
        from the processes, or, when the number of instances is unknown, from the processes per
        instance (more than pipeline × tensor degree: certainly; exactly as many: one replica per
        instance, several if there is more than one instance)."""
        pp, tp = (
            self.int_value("pipeline_parallel_degree"),
            self.int_value("tensor_parallel_degree"),
        )
        replicas = self.replicas
        if replicas is not None:
            if replicas <= 1:
                return None
            return Replicas(
                f"With {self.world} processes and pipeline × tensor degree {pp} × {tp}, the job"
                f" runs {replicas} model replicas",
                True,
            )
        per_host, count = self.launch("processes_per_host"), self.launch("instance_count")
        if (
            not isinstance(per_host, int)
            or isinstance(per_host, bool)
            or isinstance(count, int)
            or pp is None
            or tp is None
        ):
            return None
        shape = f"With {per_host} processes per instance and pipeline × tensor degree {pp} × {tp}"
        if per_host > pp * tp:
            return Replicas(f"{shape}, every instance holds more than one model replica", True)
        if per_host == pp * tp:
            return Replicas(
                f"{shape}, each instance holds one model replica, so if instance_count is above 1"
                " the job runs several",
                False,
            )
        return None

    @property
    def modelparallel_enabled(self) -> bool:
        """A launcher that enables the library (``modelparallel.enabled`` is the literal True)."""
        mp = self.launcher.modelparallel if self.launcher is not None else None
        enabled = mp.get("enabled") if mp is not None else None
        return enabled is not None and enabled.plain() is True


@dataclass(frozen=True)
class ConfigFix:
    """A fix as replacements of located values and keys added to located dicts."""

    applicability: Applicability
    description: str
    replace: tuple[tuple[Located, str], ...] = ()
    add: tuple[tuple[Located, str], ...] = ()


def rename_fix(
    located: Located, key: str, suggestion: Optional[str], container: Located
) -> Optional[ConfigFix]:
    """Rename a misspelt ``key`` (whose value is ``located``) to its close match. Unsafe: a
    close match is a guess, and the setting then takes effect, which changes the job. None
    without a match, when the match is already set in ``container``, or when the key is not
    written as a plain literal."""
    if suggestion is None or container.get(suggestion) is not None:
        return None
    replacement = renamed_key(located, key, suggestion)
    if replacement is None:
        return None
    return ConfigFix(
        Applicability.UNSAFE, f"Rename `{key}` to `{suggestion}`", replace=(replacement,)
    )


@dataclass(frozen=True)
class ConfigProblem:
    at: Optional[Located]
    # The finding's one-line title, its why and fix, and what it read (``Rule.report``).
    message: str
    severity: Severity = Severity.ERROR
    fix: Optional[ConfigFix] = None
    explanation: str = ""
    evidence: tuple[str, ...] = ()
    # Narrower SMP versions than the rule's for this one problem (see ``Rule.since``), and the
    # oldest release the configuration can work in at all (``Rule.report``'s ``implied``).
    since: Optional[Version] = None
    until: Optional[Version] = None
    implied: Optional[Version] = None


class ConfigRule(Rule):
    """Base of the SMP8xx rules: implement the classmethod ``check``; the base finds the
    configurations in a file. ``check`` sees only the view, so the same code checks the
    ``[tool.smpfix.job]`` table (``smpfix.engine.job_table``). A rule that needs the launcher itself
    (the ``mpi`` dict, ``modelparallel.enabled``) returns early when ``view.launcher`` is None.
    ``flavours`` names the configurations a rule checks (``judges``); a rule about settings
    only the PyTorch library has declares PyTorch alone.
    """

    flavours = BOTH
    scope = FileScope.CONFIGURATION

    @classmethod
    def judges(cls, view: ConfigView) -> bool:
        """Whether the rule checks this configuration (one of its flavours)."""
        return view.flavour in cls.flavours

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        raise NotImplementedError

    def check_with_code(self, view: ConfigView) -> Iterator[ConfigProblem]:
        """Problems that also need the code the configuration runs (the script a launcher
        starts, the script holding an ``smp.init`` dict); none by default. Not run for the
        ``[tool.smpfix.job]`` table, which configures no particular script."""
        return iter(())

    def problems(self, view: ConfigView) -> Iterator[ConfigProblem]:
        """What ``check`` and ``check_with_code`` find; a rule whose two kinds of problem can
        describe one mistake twice overrides this to keep one."""
        yield from self.check(view)
        yield from self.check_with_code(view)

    def views(self) -> list[ConfigView]:
        """The configurations the rule looks at: this file's SMP v1 ones (the SMP v2 family
        looks at SMP v2's)."""
        return config_views(self.program)

    def leave_Module(self, node: cst.Module) -> None:
        reported: set[tuple[int, str]] = set()
        for view in self.views():
            if not self.judges(view):
                continue
            for problem in self.problems(view):
                anchor = (problem.at.anchor if problem.at is not None else None) or view.anchor
                # Two estimators sharing one options dict would otherwise report its entry twice.
                if anchor is None or (id(anchor), problem.message) in reported:
                    continue
                reported.add((id(anchor), problem.message))
                severity, evidence = problem.severity, problem.evidence
                if (
                    view.kind == "smp.init"
                    and self.program.job.init_dict is InitDict.UNCERTAIN
                    and severity is Severity.ERROR
                ):
                    # The library may never read this dict (jobfacts, InitDict).
                    evidence = (
                        "this matters only if the library reads this dict:"
                        f" {self.program.job.init_dict_reason}",
                        *evidence,
                    )
                    severity = Severity.WARNING
                untaken = view.launcher.untaken if view.launcher is not None else ""
                if untaken:
                    # A launcher in a branch its file's own values do not take: the code offers
                    # this job, it does not start it.
                    evidence = (
                        f"this launcher is in the branch `{untaken}`, which the launcher's own"
                        " values do not take: a job the code offers",
                        *evidence,
                    )
                self.report(
                    anchor,
                    problem.message,
                    explanation=problem.explanation,
                    evidence=evidence,
                    severity=severity,
                    fix=_pending(problem.fix),
                    since=problem.since,
                    until=problem.until,
                    version=view.smp_version,
                    implied=problem.implied,
                    offered=bool(untaken),
                )


def _pending(fix: Optional[ConfigFix]) -> Optional[PendingFix]:
    if fix is None:
        return None
    edits: list[NodeEdit] = []
    for located, text in fix.replace:
        if located.node is None:
            return None
        edits.append(ReplaceNode(located.node, text))
    for container, text in fix.add:
        edit = insert_entry(container, text)
        if edit is None:
            return None
        edits.append(edit)
    return PendingFix(fix.applicability, fix.description, tuple(edits))


def insert_entry(container: Located, text: str) -> Optional[NodeEdit]:
    """An edit adding ``"key": value`` text to the dict display ``container`` was written as,
    or ``keyword=value`` text to the call it was written as (an estimator's keywords), in the
    layout the dict or call already has (``AppendElement``)."""
    node = container.node
    if type(node) is cst.Dict:
        if not node.elements:
            return ReplaceNode(node, "{" + text + "}")
        return AppendElement(node, (text,))
    if type(node) is cst.Call and node.args:
        return AppendElement(node, (text,))
    return None


def config_views(program: Program) -> list[ConfigView]:
    """The configurations stated in this file, computed once per file for all config rules."""
    return program.answer(ConfigViews).views


@dataclass(frozen=True)
class ConfigViews:
    """The configurations a file states (launchers, ``smp.init`` dicts), for every config rule."""

    views: list[ConfigView]

    @classmethod
    def of_program(cls, program: Program) -> ConfigViews:
        return cls(_views(program))


@dataclass(frozen=True)
class FileLaunchers:
    """The estimator constructions of a file, resolved once per tree for the config rules and
    for the engine, which reports a parameters file it refused to read."""

    launchers: list[Launcher]

    @classmethod
    def of_file(cls, file: ParsedFile) -> FileLaunchers:
        if not file.facts.estimator_calls:
            return cls([])
        return cls(find_launchers(file.module, file.facts.imports, file.path))


def _views(program: Program) -> list[ConfigView]:
    facts, job = program.facts, program.job
    views: list[ConfigView] = [
        view
        for view in launcher_views(program)
        if not starts_smp_v2(program, view)  # SMP v2's: the SMP v2 family checks them
    ]
    if job.init_dict is InitDict.IGNORED:
        # The library never reads the dict (it initialised itself on import): nothing to check.
        return views
    script_flavour = Flavour.TENSORFLOW if facts.is_tensorflow else Flavour.PYTORCH
    for call in facts.smp_init_calls:
        argument = evaluate_argument(program.module, facts.imports, call, program.path)
        if argument is not None and isinstance(argument.value, dict):
            views.append(
                ConfigView(
                    "smp.init",
                    "the smp.init({...}) dict",
                    argument,
                    False,
                    call,
                    smp_version=job.smp_version,
                    flavour=script_flavour,
                )
            )
    return views


def launcher_views(program: Program) -> list[ConfigView]:
    """A view of each estimator call of this file, as SMP v1 would read it (``v2`` False);
    computed once per file for both libraries' rules."""
    return program.answer(LauncherViews).views


@dataclass(frozen=True)
class LauncherViews:
    """The estimator calls of a file, as configurations (``launcher_views``)."""

    views: list[ConfigView]

    @classmethod
    def of_program(cls, program: Program) -> LauncherViews:
        return cls(_launcher_views(program))


def _launcher_views(program: Program) -> list[ConfigView]:
    facts, job = program.facts, program.job
    views: list[ConfigView] = []
    if not facts.estimator_calls:
        return views
    for launcher in program.file.answer(FileLaunchers).launchers:
        parameters = launcher.parameters
        mp = launcher.modelparallel
        enabled = mp.get("enabled") if mp is not None else None
        complete = (
            parameters is not None
            and isinstance(parameters.value, dict)
            and enabled is not None
            and enabled.plain() is True
        )
        mpi = launcher.mpi
        extra = {
            key: located
            for key, located in (
                ("instance_type", launcher.keyword("instance_type")),
                ("instance_count", launcher.keyword("instance_count")),
                (
                    "processes_per_host",
                    mpi.get("processes_per_host") if mpi is not None else None,
                ),
            )
            if located is not None
        }
        # A version the user declared (--job, pyproject.toml) wins over the launcher's container.
        version = job.smp_version or launcher_smp_version(launcher, "the launcher")
        views.append(
            ConfigView(
                "launcher",
                "the launcher",
                parameters,
                complete,
                launcher.call,
                launcher,
                extra,
                version,
                launcher_flavour(launcher),
            )
        )
    return views


def starts_smp_v2(program: Program, view: ConfigView) -> bool:
    """The launcher starts SMP v2 (``smpfix.job.smp_v2``), to which no v1 rule applies: by its
    own settings, or because the script it starts (or a project module that script imports)
    imports ``torch.sagemaker``."""
    assert view.launcher is not None
    if launcher_v2(view.launcher, view.where) is not None:
        return True
    code = launched_code(program, view)
    return code is not None and any(facts.imports_smp_v2 for facts in code.files)
