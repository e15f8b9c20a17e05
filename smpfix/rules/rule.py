"""The rule base class: what a rule declares about itself and how it reports.

A rule is one small module in a family folder of ``smpfix/rules/``, named for the rule
(``smp101_optimizer_before_distributed_model.py``): a subclass of ``Rule`` whose class
attributes say, once, everything the CLI, the pages and the analysis know about it, with
``visit_<Node>``/``leave_<Node>`` methods that the shared walker calls, and calls to
``self.report``. Rules never print and never write; the analysis turns reports into findings.
Rules register themselves by being defined there (``smpfix.rules.registry`` finds them); there
is no list to edit. ``Rule.__init_subclass__`` gives such a class its code and name from its
module's name and its family's scope, and refuses a class whose declarations contradict each
other, so that a mistake fails at import rather than in a test of copies.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, final

import libcst as cst

from smpfix.base.edits import NodeEdit
from smpfix.base.findings import TITLE_LIMIT, Applicability, Severity
from smpfix.base.flavour import BOTH, ONLY_PYTORCH, Flavour
from smpfix.base.walker import Ancestry
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.job.versions import SmpVersion, Version, condition
from smpfix.program.facts import FileFacts
from smpfix.program.model import Program
from smpfix.program.paths.branches import Reach, Requirement
from smpfix.program.paths.conditions import Hypothesis
from smpfix.rules.registry import family_scope, rule_module
from smpfix.rules.scope import FileScope, Library


class FixAvailability(str, enum.Enum):
    """What a rule's fixes can be, for ``smpfix rules`` and the pages."""

    NONE = "none"
    SAFE = "safe"
    UNSAFE = "unsafe"
    SOMETIMES_SAFE = "safe or unsafe"


class TensorParallelism(str, enum.Enum):
    """How a rule depends on tensor parallelism; its page says so (issue 12).

    The library replaces only the modules the program marks, whatever
    ``tensor_parallel_degree`` says, while the rank topology (which ranks share data, a
    checkpoint, a group) follows the degree alone, marked modules or not.
    """

    NONE = "none"
    DEGREE = "degree"  # the rank topology
    MARKING = "marking"  # the modules the library replaces
    BOTH = "both"  # slices of distributed parameters: a marking and a degree above 1
    CONFIGURED = "configured"  # configuration rules: the values as written

    @property
    def words(self) -> str:
        """What the page's "**Tensor parallelism:** this rule ..." line says; a page may go on
        after these words (``smpfix.rules.pages``)."""
        return _TENSOR_PARALLELISM_WORDS[self]


_TENSOR_PARALLELISM_WORDS = {
    TensorParallelism.NONE: "does not depend on tensor parallelism",
    TensorParallelism.DEGREE: (
        "depends on the rank topology, so on `tensor_parallel_degree` alone, whether or not "
        "modules are marked"
    ),
    TensorParallelism.MARKING: (
        "depends on replaced modules: the program's tensor-parallel marking "
        "(`smp.tensor_parallelism()`, `smp.model_creation(tensor_parallelism=...)` not literally "
        "false, `smp.set_tensor_parallelism`, `smp.nn.Distributed*`, in the script or the project "
        "modules it imports), not the degree"
    ),
    TensorParallelism.BOTH: "needs both",
    TensorParallelism.CONFIGURED: (
        "checks the configured values as written (`tensor_parallel_degree` where it reads it), "
        "not the script's marking"
    ),
}


@dataclass(frozen=True)
class PendingFix:
    applicability: Applicability
    description: str
    edits: tuple[NodeEdit, ...]


@dataclass(frozen=True)
class Report:
    """What a rule said, before positions are known: ``message`` is the one-line title,
    ``explanation`` the why and the fix, ``evidence`` what the rule read (``Finding``)."""

    code: str
    node: cst.CSTNode
    message: str
    severity: Severity
    fix: Optional[PendingFix] = None
    job_facts: tuple[FeatureState, ...] = field(default=())
    explanation: str = ""
    evidence: tuple[str, ...] = ()


class Rule:
    # Given by the module's name (``smp101_optimizer_before_distributed_model.py`` -> ``SMP101``,
    # ``optimizer-before-distributed-model``); a rule that states them must agree with it.
    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    # The files the rule can report on; its family's (``SCOPE`` in the family's ``__init__.py``)
    # unless it declares a scope within that one. ``applies_to`` holds the rule to it.
    scope: ClassVar[FileScope] = FileScope.SMP
    # How the rule depends on tensor parallelism: every rule of smpfix declares it, its page
    # says it.
    tensor_parallelism: ClassVar[TensorParallelism]
    fix_availability: ClassVar[FixAvailability] = FixAvailability.NONE
    depends_on: ClassVar[tuple[str, ...]] = ()
    # Rules that the Hugging Face Trainer already satisfies are skipped in Trainer scripts.
    satisfied_by_hf_trainer: ClassVar[bool] = False
    # The severity of a finding when the job is known; SARIF's ``defaultConfiguration.level``.
    default_severity: ClassVar[Severity] = Severity.ERROR
    # Rules that also check helper modules (data.py, model.py) that never import the library
    # but are imported by a checked SMP script; ``self.program.importers`` then holds the scripts.
    runs_on_helper_modules: ClassVar[bool] = False
    # The SMP versions the rule's advice holds for, inclusive (``smpfix.job.versions``); None
    # is no bound. Set only where the advice depends on the version beyond what the features
    # the rule requires already imply. A finding on a job of another version is dropped; on a
    # job whose version is unknown it is at most a hint.
    since: ClassVar[Optional[Version]] = None
    until: ClassVar[Optional[Version]] = None
    # Narrower ranges of some of the rule's findings (what the finding is about -> since, until),
    # as ``smpfix rules`` and the page list them; each is passed to ``report`` with its finding.
    finding_ranges: ClassVar[Mapping[str, tuple[Optional[Version], Optional[Version]]]] = {}
    # The library flavours whose scripts the rule knows: a PyTorch rule never runs on a
    # TensorFlow script and the other way round (``FileFacts.flavours``). Configuration rules
    # apply this to each configuration's flavour instead (``ConfigView.flavour``).
    flavours: ClassVar[frozenset[Flavour]] = ONLY_PYTORCH
    # The library whose jobs the rule checks: SMP v1 unless it says otherwise (the SMP v2
    # family, ``smpfix/rules/smp_v2/``); the analysis routes each job to its library's rules.
    library: ClassVar[Library] = Library.V1
    # The oldest release any finding of the rule is about, whatever the file's own job says
    # (a v2 configuration runs SMP 2.0 at least): ``implied`` for every ``report``.
    implied: ClassVar[Optional[Version]] = None

    @classmethod
    def versions_table(cls) -> str:
        """Markdown the page's "Versions" section ends with, made from the data the rule judges
        by (SMP812: the release each configuration key arrived in), so the page cannot drift
        from the rule."""
        return ""

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        """``program`` is the model of the file being checked; ``ancestry`` the nodes from the
        module down to the one the shared walk is visiting."""
        self.program = program
        self.ancestry = ancestry
        self.reports: list[Report] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Complete and check what a rule of smpfix declares, when its class is created.

        A class defined in a rule module of a family folder is a rule of smpfix: it gets its
        code and name from the module's name and, unless it declares one, its family's scope.
        Its scope must lie within its family's (the registry imports a family's rules only for
        files its scope admits), its flavours within its scope's, and it must say how it
        depends on tensor parallelism. Other subclasses (the framework's ``ConfigRule``, a
        test's probe) are left as they are. No rule overrides ``applies_to``.
        """
        super().__init_subclass__(**kwargs)
        if "applies_to" in vars(cls):
            raise TypeError(
                f"{cls.__module__}.{cls.__qualname__} overrides applies_to: declare its scope and "
                "flavours, and a further condition on the file as its precondition"
            )
        found = rule_module(cls.__module__)
        if found is None:
            return
        for attribute, given in (("code", found.code), ("name", found.rule_name)):
            stated = vars(cls).get(attribute)
            if stated is not None and stated != given:
                raise TypeError(
                    f"{cls.__module__} defines a rule whose {attribute} is {stated!r}: its module's"
                    f" name makes it {given!r}"
                )
            setattr(cls, attribute, given)
        family = family_scope(found.family)
        if next(base for base in cls.__mro__ if "scope" in vars(base)) is Rule:
            cls.scope = family
        declared_flavours = next(base for base in cls.__mro__ if "flavours" in vars(base))
        if cls.scope is FileScope.ANY and declared_flavours is Rule:
            # A rule of every file (SMP900) checks both flavours' scripts, which ``smpfix
            # rules`` lists; the default, PyTorch's, is for the rules of scripts.
            cls.flavours = BOTH
        if not cls.scope.within(family):
            raise TypeError(
                f"{cls.code}'s scope, {cls.scope.value}, is not within its family's,"
                f" {family.value}: the registry would never run it on some of the files it"
                " reports on"
            )
        if not cls.flavours <= cls.scope.flavours:
            raise TypeError(f"{cls.code} declares flavours its scope ({cls.scope.value}) excludes")
        if not isinstance(getattr(cls, "tensor_parallelism", None), TensorParallelism):
            raise TypeError(
                f"{cls.code} must declare how it depends on tensor parallelism: "
                "tensor_parallelism = TensorParallelism.<...>"
            )

    @final
    @classmethod
    def applies_to(cls, facts: FileFacts) -> bool:
        """Whether the rule runs on this file at all: its scope admits the file (for a scope of
        scripts, a script of one of its flavours), the Hugging Face ``Trainer`` does not
        already satisfy it there, and its ``precondition`` holds."""
        if cls.satisfied_by_hf_trainer and facts.uses_hf_trainer:
            return False
        if not cls.scope.admits(facts):
            return False
        if cls.scope.of_scripts and not facts.flavours & cls.flavours:
            return False
        return cls.precondition(facts)

    @classmethod
    def runs_on(cls, v2_job: bool) -> bool:
        """Whether the rule runs on a file whose job is SMP v2 (``v2_job``) or SMP v1: a rule
        of its library's jobs only. The SMP v2 family's configuration rules run on any file and
        judge each configuration by its own library instead (a launcher file is no job)."""
        return cls.library.checks(v2_job)

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        """What a file in the rule's scope must also have for the rule to look at it (a
        wrapped model, more than one step function); any such file by default. A cheap
        test of the facts that spares a file the rule's walk, not the rule's judgement."""
        return True

    def report(
        self,
        node: cst.CSTNode,
        message: str,
        *,
        explanation: str = "",
        evidence: Sequence[str] = (),
        severity: Severity = Severity.ERROR,
        fix: Optional[PendingFix] = None,
        job_facts: Sequence[FeatureState] = (),
        since: Optional[Version] = None,
        until: Optional[Version] = None,
        version: Optional[SmpVersion] = None,
        implied: Optional[Version] = None,
        offered: bool = False,
    ) -> None:
        """Record a finding. ``message`` is its title: one line of at most 100 characters that
        says what is wrong here; ``explanation`` says why it matters on a cluster and what to
        do; ``evidence`` lists what the rule read (the arithmetic, the code it relies on), one
        line each; the job settings in ``job_facts`` are added to it. ``since``/``until``
        narrow the rule's version range for this one finding; ``version`` is the library
        version of the configuration it is about, when that is not the job's (a launcher's own
        container); ``implied`` is the oldest release in which the code or configuration it is
        about can work at all (it uses something that arrived then), which rules those out
        unless the version says otherwise. ``offered``: the finding is about a job the code
        offers in a branch its own values do not take (a hint, kept where that branch never
        runs)."""
        since = since if since is not None else self.since
        until = until if until is not None else self.until
        implied = implied if implied is not None else self.implied
        applies = self.program.job.version_applies(since, until, version, implied)
        if applies is Tri.OFF:
            return
        if applies is Tri.UNKNOWN:
            severity = Severity.HINT
        verdict = self.program.branches.reach(node, Hypothesis(since=since, until=until))
        if verdict.reach is Reach.NEVER and not offered:
            # The code's own condition keeps this path from running in this job.
            return
        if offered:
            severity = Severity.HINT
        evidence = tuple(evidence)
        if self.program.job.offered_job:
            # Every launcher of this script sits in a branch its values do not take: the job
            # is one the code offers, so what breaks in it is a hint, saying which branch.
            severity = Severity.HINT
            evidence = (f"the job is only offered: {self.program.job.offered_job}", *evidence)
        unused = self.program.uncalled.enclosing(node, self.program.parents)
        if unused is not None:
            # A function of the script that nothing in the project calls: no job runs it.
            severity = Severity.HINT
            evidence = (
                f"this code is in `{unused.name.value}()`, which nothing in the project calls",
                *evidence,
            )
        if verdict.reach is Reach.OFF_BY_DEFAULT and verdict.requirement is not None:
            severity = Severity.HINT
            how = verdict.known.how if verdict.known else ()
            title, clause = self._off_by_default(message, verdict.requirement, how)
            message, evidence = title, (f"this code {clause}", *evidence)
        if _only_offered(job_facts) is not None:
            # Nothing enables the feature the finding needs; the code offers it (a
            # commented-out launcher value): a configuration the job does not use. Its job
            # fact, in the evidence, says where.
            severity = Severity.HINT
        self.reports.append(
            Report(
                self.code,
                node,
                message,
                severity,
                fix,
                tuple(job_facts),
                explanation,
                evidence,
            )
        )

    def _off_by_default(
        self, title: str, requirement: Requirement, how: Sequence[str]
    ) -> tuple[str, str]:
        """A hint on code the job does not run by default: its title with the condition the
        code needs, when that fits on its line, and that switch as a short evidence clause
        ("runs only when `args.do_train` is false; `--do_train` defaults to 0 and the launcher
        launch.py sets 1")."""
        test = " ".join(self.program.code_for(requirement.test).split())
        side, other = ("true", "false") if requirement.holds else ("false", "true")
        condition = f" (only when `{test}` is {side})"
        if len(title) + len(condition) <= TITLE_LIMIT:
            title += condition
        why = how[0] if how else f"by default it is {other}"
        return title, f"runs only when `{test}` is {side}; {why}"

    def version_condition(
        self, since: Optional[Version] = None, until: Optional[Version] = None
    ) -> str:
        """Words for a message about the version: "the job runs SMP 1.13 (...)" or "if ..."."""
        since = since if since is not None else self.since
        until = until if until is not None else self.until
        return condition(self.program.job.smp_version, since, until)

    def feature(self, key: str, at: Optional[cst.CSTNode] = None) -> FeatureState:
        """The job's feature state; at ``at``, OFF when the code's own guard there cannot
        hold with the feature on (``elif`` after ``if args.shard_optimizer_state > 0:``)."""
        state = self.program.job.feature(key)
        if at is None or state.state is Tri.OFF:
            return state
        guard = self.program.branches.excludes(at, key)
        if guard is None:
            return state
        test = " ".join(self.program.code_for(guard.test).split())
        side = "true" if guard.holds else "false"
        return FeatureState(
            state.feature,
            Tri.OFF,
            f"this code runs only when `{test}` is {side}, which it is not with"
            f" {state.feature.title} on",
        )

    def tp_distributed(self, at: Optional[cst.CSTNode] = None) -> FeatureState:
        """Tensor parallelism with distributed modules: a degree above 1 *and* marked modules.

        Harm that comes from slices of distributed parameters (identical slices from one
        seed, optimizer state split across tensor-parallel ranks) needs both; OFF when either
        is off, ON when both are on, UNKNOWN otherwise.
        """
        degree = self.feature("TP", at)
        replaced = self.program.tp_replacement
        if degree.state is Tri.OFF:
            return degree
        if replaced.state is Tri.OFF:
            return replaced.feature_state()
        if degree.state is Tri.ON and replaced.state is Tri.UNKNOWN:
            return FeatureState(degree.feature, Tri.UNKNOWN, f"{degree.source}; {replaced.source}")
        return degree

    @staticmethod
    def severity_when(state: FeatureState) -> Optional[Severity]:
        """For a rule that only matters when a feature is ON: error, warning, or silence."""
        return {Tri.ON: Severity.ERROR, Tri.UNKNOWN: Severity.WARNING, Tri.OFF: None}[state.state]


def _only_offered(states: Sequence[FeatureState]) -> Optional[FeatureState]:
    """The offered feature a finding depends on when that is all that can make it hold: no
    feature it names is ON or unknown for another reason (``FeatureState.offered``)."""
    offered = next((state for state in states if state.offered), None)
    if offered is None:
        return None
    if any(
        state.state is Tri.ON or (state.state is Tri.UNKNOWN and not state.offered)
        for state in states
    ):
        return None
    return offered
