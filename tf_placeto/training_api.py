"""Training the Placeto policy from Python, as `tf-placeto train` does.

A TrainingPlan says what to train on and how long; train() profiles the graphs (or reads the
corpus's compact profiles: `corpus`, `corpus:FAMILY`, `corpus:NAME`), poses their problems and
runs the stages: imitation of the best known decisions, iterations in the
simulator, iterations measured for real. A run killed at any point resumes where it stopped
when train() is called again with the same folder. Progress goes to the "tf_placeto" logger
and to progress bars on a terminal (tf_placeto.log).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import os
from typing import Optional, Sequence

import pandas as pd

from tf_placeto.errors import InputError
from tf_placeto.examples import registry
from tf_placeto.log import progress
from tf_placeto.measure.costs.costmodel import Link
from tf_placeto.placers.corpus_problems import corpus_problems, load_profiles, setting
from tf_placeto.policy.checkpoints import (CHECKPOINTS, check_training_folder,
                                           iterations_by_setting, warm_start_folders)
from tf_placeto.policy.episode import SimulatedGreedy, SimulatorVeto, greedy_walk
from tf_placeto.policy.inference import loaded_policy
from tf_placeto.policy.observation import GraphView
from tf_placeto.policy.real import MeasuredGraph, RealSteps
from tf_placeto.policy.starts import best_known, initial_placement
from tf_placeto.settings import Target
from tf_placeto.workload import load_workload

log = logging.getLogger(__name__)
CORPUS = "corpus"      # graphs: the corpus's compact profiles (placers/corpus_problems.py)
OWN = "own"            # the lesson of a problem whose teacher is the warm start's own policy


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
    """What a run trains on and how: `tf-placeto train --help` says what each option does
    (graphs: --graphs, links: --link, starts: --start, the others by their own names)."""

    graphs: Sequence[str]                # SOURCEs; examples:FAMILY stands for its members;
    #                                      corpus[:FAMILY|:NAME]: the corpus's compact profiles
    counts: Sequence[int]                # device counts, each of at least 2
    out: str                             # new, empty, or a folder a run trained in
    members: Optional[str] = None        # "A-B": which members of each family (None: all)
    max_groups: int = 128                # an episode visits every group: fewer train faster
    links: Sequence[Optional[str]] = (None,)     # each problem under each (None: measured)
    settings: Sequence[str] = ("one_process",)   # the corpus's problems: under each of these
    without: Sequence[str] = ()          # corpus families left out (to judge them unseen)
    steps: int = 500                     # simulated iterations in all, counting those done
    episodes: int = 4                    # parallel episodes per iteration
    imitate: int = 0                     # epochs of imitation before the iterations
    keep_imitating: int = 0              # imitation batches after an iteration that lags
    keep_imitating_where: str = "behind"     # or "one-device" (starts.IMITATE_WHERE)
    imitate_climb: float = 0.0           # seconds of hill climbing a lesson may take
    imitate_exact: float = 0.0           # seconds the exact placer may take per problem
    imitate_own: float = 0.0             # keep the warm start's own decision within this
    #                                      factor of the best known (0: not asked)
    imitate_greedy: bool = False         # and the simulator's greedy pass's, where faster
    imitate_veto: Optional[float] = None     # and its own moves with the simulator's veto
    #                                          beyond this margin, where faster (None: not)
    dagger: int = 0                      # also teach lessons along the network's own walks
    #                                      of up to this many passes (0: not)
    real_steps: int = 0                  # iterations measured for real, after the others
    algorithm: str = "reinforce"         # or "ppo"
    embedding: int = 32                  # the network's width (a group's embedding)
    rounds: int = 8                      # its rounds of message passing
    step_change_weight: Optional[float] = None   # its path from the step change, weighed
    #                                              so as the run begins (None: the warm
    #                                              start's own, else 0)
    warm_start: Optional[Sequence[str]] = None   # training folders whose weights (of
    #                                              several: their mean) a new run takes
    starts: Sequence[str] = ("random",)  # starts.START_KINDS; several: each problem from each
    seed: int = 0

    def __post_init__(self):
        for name in ("graphs", "counts", "links", "settings", "without", "starts"):  # frozen
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "warm_start", warm_start_folders(self.warm_start))

    @property
    def averages(self) -> bool:
        """Whether the run starts from the mean of several networks' weights."""
        return len(self.warm_start or ()) > 1

    @property
    def composes(self) -> bool:
        """Whether the run starts from a network that no folder holds: the mean of several
        warm starts, or a warm start whose path from the step change is weighed anew
        (`step_change_weight`)."""
        return self.averages or bool(self.warm_start) and self.step_change_weight is not None


@dataclasses.dataclass
class TrainingResult:
    """What a run trained: its exported policy (a SavedModel that `place --policy DIR` and
    method placeto take through its folder), its log as training.json keeps it, and what it
    was posed."""

    policy: str                          # out/policy
    log: dict                            # config, imitation (epochs), iterations (rows)
    problems: int                        # graphs x counts x links (+ the runtime's own)
    starts: list                         # the starts each problem was posed from

    def by_setting(self) -> pd.DataFrame:
        """Per link and start: iterations, how many imitation followed, mean return."""
        return iterations_by_setting(self.log["iterations"])


def train(plan: TrainingPlan, target: Optional[Target] = None) -> TrainingResult:
    """Train the Placeto policy as `plan` says, into plan.out, and export it.

    target: where the graphs are profiled (its cache keeps the profiles) and, with
    plan.real_steps, measured (neither devices nor a cluster: local:2, two worker processes
    of this machine); the corpus's graphs need none, and none starts for them alone. Bad
    input is refused before any runtime starts."""
    _check(plan)
    corpus = _corpus_profiles(plan)          # checked too before any runtime starts
    target = (target or Target()).or_cluster("local:2")
    # heavy: the trainer loads TF-Agents and TensorFlow when imported
    from tf_placeto.policy.training import Trainer, TrainingConfig

    with contextlib.ExitStack() as stack:
        profiled = [graph for graph in plan.graphs if not _is_corpus(graph)]
        runtime = stack.enter_context(target.open()) if profiled or plan.real_steps else None
        if plan.real_steps and len(runtime.device_names) < 2:
            raise InputError("--real-steps measures on the runtime's devices: give a runtime "
                             "with at least 2 (--cluster local:2, --devices 2)")
        problems, measurable, labels = training_problems(
            profiled, plan.counts, runtime, members=plan.members, links=plan.links,
            on_runtime=bool(plan.real_steps), max_groups=plan.max_groups, cache=target.cache)
        posed = corpus_problems(corpus, plan.settings, plan.counts)
        problems += [p.problem for p in posed]
        labels += [{"graph": p.graph, "devices": p.devices, "link": p.setting} for p in posed]
        if not plan.real_steps:
            stack.close()       # the runtime is needed again only to measure
        log.info("writing the checkpoints, the log and the policy to %s", plan.out)
        kinds = list(dict.fromkeys(plan.starts))
        starts = {}             # kind -> initial_placement of each problem
        for kind in kinds:      # a random start is drawn by the environment: nothing to wait for
            shown = problems if kind == "random" else progress(problems, desc=f"{kind} starts",
                                                               unit="problem")
            starts[kind] = [initial_placement(problem, kind) for problem in shown]
        initial = [start[1] for kind in kinds for start in starts[kind]]
        trainer = Trainer(problems * len(kinds), plan.out, TrainingConfig(
            algorithm=plan.algorithm, episodes=plan.episodes, seed=plan.seed,
            embedding=plan.embedding, rounds=plan.rounds,
            step_change_weight=plan.step_change_weight, warm_start=plan.warm_start,
            keep_imitating=plan.keep_imitating,
            keep_imitating_where=plan.keep_imitating_where), initial=initial,
            starts=[kind for kind in kinds for _ in problems], labels=labels * len(kinds))
        _imitate(trainer, plan, problems, kinds, initial, fast=starts.get("fast"))
        _iterate(trainer, plan.steps, plan.episodes, "iteration")
        if not trainer.checkpointed:
            trainer.save()          # a run that trains nothing: its network as it began
        if plan.real_steps:
            _iterate(trainer, plan.steps + plan.real_steps, plan.episodes, "real iteration",
                     real=RealSteps(runtime, measurable))
    return TrainingResult(policy=trainer.export(), log=trainer.logged(),
                          problems=len(problems), starts=kinds)


def _is_corpus(graph: str) -> bool:
    return graph == CORPUS or graph.startswith(CORPUS + ":")


def _corpus_profiles(plan: TrainingPlan) -> list:
    """The corpus's compact profiles that `plan` names (none if it names none)."""
    asked = [graph[len(CORPUS) + 1:] for graph in plan.graphs if _is_corpus(graph)]
    if not asked:
        return []
    profiles = load_profiles(without=plan.without)
    missing = set(asked) - {"", *(p.name for p in profiles), *(p.family for p in profiles)}
    if missing:
        raise InputError(f"no corpus family or model {', '.join(sorted(missing))} "
                         f"(left out: {', '.join(plan.without) or 'none'}; families: "
                         f"{', '.join(sorted({p.family for p in load_profiles()}))})")
    chosen = [p for p in profiles if "" in asked or p.name in asked or p.family in asked]
    log.info("training on %d corpus graphs x %d settings x %d device counts", len(chosen),
             len(plan.settings), len(plan.counts))
    return chosen


def _check(plan: TrainingPlan) -> None:
    """Refuse what cannot train, before a runtime starts (a cluster would start and warm its
    links first)."""
    if plan.steps < 1 and not plan.imitate and not plan.real_steps and not plan.composes:
        raise InputError("--steps 0 trains nothing: give at least 1 iteration, --imitate, "
                         "--real-steps, several --warm-start DIRs to average or one with "
                         "--step-change-weight")
    for flag in ("embedding", "rounds"):
        if getattr(plan, flag) < 1:
            raise InputError(f"--{flag} {getattr(plan, flag)}: the network needs at least 1")
    bad = [n for n in plan.counts if n < 2]
    if bad:
        raise InputError(f"--counts {bad[0]}: a placement needs at least 2 devices")
    if plan.keep_imitating_where != "behind" and not plan.keep_imitating:
        raise InputError("--keep-imitating-where chooses when --keep-imitating imitates: "
                         "give --keep-imitating K too")
    if plan.imitate_own and plan.imitate_own < 1.0:
        raise InputError(f"--imitate-own {plan.imitate_own}: a factor of the best known "
                         "decision's step time, at least 1")
    if plan.imitate_own and not plan.warm_start:
        raise InputError("--imitate-own keeps what a trained network decides: give "
                         "--warm-start too")
    if plan.imitate_own and plan.averages:
        raise InputError("--imitate-own keeps what one trained network decides: give one "
                         "--warm-start DIR")
    if plan.imitate_greedy and not plan.imitate_own:
        raise InputError("--imitate-greedy offers a second teacher to --imitate-own: give "
                         "--imitate-own X too")
    if plan.imitate_veto is not None and not plan.imitate_own:
        raise InputError("--imitate-veto offers another teacher to --imitate-own: give "
                         "--imitate-own X too")
    if plan.imitate_veto is not None and plan.imitate_veto < 0:
        raise InputError(f"--imitate-veto {plan.imitate_veto}: a margin, at least 0")
    if plan.dagger < 0:
        raise InputError(f"--dagger PASSES: at least 1, not {plan.dagger}")
    if plan.dagger and not plan.imitate:
        raise InputError("--dagger walks the network's own episodes before each epoch of "
                         "imitation: give --imitate E too")
    for flag in ("imitate_climb", "imitate_exact", "imitate_own"):
        if getattr(plan, flag) and not (plan.imitate or plan.keep_imitating):
            raise InputError(f"--{flag.replace('_', '-')} chooses what imitation teaches: "
                             "give --imitate or --keep-imitating too")
    registry.member_range(plan.members)
    check_training_folder(plan.out)
    for folder in plan.warm_start or ():
        if not os.path.isdir(os.path.join(folder, CHECKPOINTS)):
            raise InputError(f"--warm-start {folder}: not a training directory (it has no "
                             f"{CHECKPOINTS}/)")
    for link in plan.links:
        if link is not None:
            Link.parse(link)
    for name in plan.settings:
        setting(name)


def _imitate(trainer, plan: TrainingPlan, problems: list, kinds: list, initial: list,
             fast: Optional[list] = None) -> None:
    """The imitation `plan` asks for: its epochs before the iterations (a resumed run does
    those left), and the lessons that imitation during them (keep_imitating) goes back to.
    fast: each problem's fast start, where the starts already ran the fast placers."""
    imitating = len(trainer.imitation) < plan.imitate
    if not imitating and not (plan.keep_imitating
                              and trainer.iterations_done < plan.steps + plan.real_steps):
        return
    taught, teachers = None, None
    if kinds == ["fast"] and not (plan.imitate_exact or plan.imitate_climb or plan.imitate_own):
        lessons = initial
        followed = [bool(plan.dagger)] * len(lessons)
    else:
        shown = progress(problems, desc="decisions to imitate", unit="problem")
        known = [best_known(problem, plan.imitate_exact, plan.imitate_climb,
                            fast=fast[i] if fast else None) for i, problem in enumerate(shown)]
        teachers = [None] * len(known)
        if plan.imitate_own:
            known, teachers = _followed_where_close(problems, initial, known, plan)
        lessons = [devices for _, devices in known] * len(kinds)
        teachers = teachers * len(kinds)
        taught = dict(collections.Counter(name for name, _ in known).most_common())
        log.info("imitation teaches the decisions of %s", ", ".join(
            f"{name} ({count} problems)" for name, count in taught.items()))
        # the network's own first pass needs no walk of its own: it leads there already
        followed = [bool(plan.dagger) and (name != OWN or plan.dagger > 1)
                    for name, _ in known] * len(kinds)
    trainer.demonstrate(lessons, teachers=teachers, followed=followed,
                        passes=max(plan.dagger, 1))
    if imitating:
        with progress(total=plan.imitate, initial=len(trainer.imitation), unit="epoch",
                      desc="imitation") as bar:
            def imitated(row):
                bar.update(1)
                bar.set_postfix(loss=f"{row['loss']:.3f}", accuracy=f"{row['accuracy']:.3f}")
            trainer.imitate(lessons, plan.imitate, progress=imitated, taught=taught)


def _followed_where_close(problems: list, initial: list, known: list,
                          plan: TrainingPlan) -> tuple:
    """(`known`, (name, decision) per problem, with a teacher's decision in place of the best
    known wherever it simulates within `plan.imitate_own` times it; per problem that teacher,
    or None). The teachers, each in one greedy episode from the problem's first start
    (`initial`): the warm start's exported policy ("own"), with `plan.imitate_greedy`
    episode.SimulatedGreedy ("simulated_greedy"), and with `plan.imitate_veto` the exported
    policy under episode.SimulatorVeto ("own_vetoed"); the fastest of them. Imitation then
    follows the teacher's moves on those problems and corrects the network elsewhere:
    teaching every problem another placer's whole decision costs a warm start what it knew
    (docs/results/generalisation.md)."""
    offered = [(OWN, loaded_policy(plan.warm_start[0]))]
    if plan.imitate_greedy:
        offered.append(("simulated_greedy", SimulatedGreedy()))
    if plan.imitate_veto is not None:
        offered.append(("own_vetoed", SimulatorVeto(offered[0][1], plan.imitate_veto)))
    kept, teachers = [], []
    for problem, start, (name, devices) in progress(list(zip(problems, initial, known)),
                                                    desc="teachers' decisions", unit="problem"):
        view = GraphView(problem, start)
        walks = [(greedy_walk(view, teacher), label, teacher) for label, teacher in offered]
        walk, label, teacher = min(walks, key=lambda walked: walked[0].end_value)
        if walk.end_value <= plan.imitate_own * view.objective(devices)[0]:
            name, devices = label, problem.canonical(walk.end_devices)
        else:
            teacher = None
        kept.append((name, devices))
        teachers.append(teacher)
    return kept, teachers


def _iterate(trainer, iterations: int, episodes: int, unit: str, real=None) -> None:
    """Train until `iterations` are done in all, with a progress bar."""
    if trainer.iterations_done >= iterations:
        return
    with progress(total=iterations, initial=trainer.iterations_done, unit=unit) as bar:
        def iterated(row):
            bar.update(1)
            bar.set_postfix(episodes=row["iteration"] * episodes,
                            best_speedup=f"{row['best_speedup']:.3f}x",
                            mean_return=f"{row['mean_return']:+.3f}")
        trainer.run(iterations, progress=iterated, real=real)


def training_problems(graphs: Sequence[str], counts: Sequence[int], runtime, *,
                      members: Optional[str] = None, links: Sequence[Optional[str]] = (None,),
                      on_runtime: bool = False, max_groups: int = TrainingPlan.max_groups,
                      cache: Optional[str] = None) -> tuple:
    """(problems, measurable, labels): the placement problems a run learns on.
    Each graph (examples:FAMILY: its `members`, "A-B") is profiled on `runtime` (a
    measure.runtimes.runtime.Runtime); its problems are on each device count of devices like
    the profiled ones, joined by each of `links` (None: the measured link), and with
    `on_runtime` also on the runtime's own devices. measurable: for those last problems, by
    index, what measuring their placements for real needs (policy.real.MeasuredGraph).
    labels: per problem, its graph, device count and link ("measured" for the profiled link,
    "runtime" for the runtime's own devices), which training's log keeps with each iteration."""
    sources = registry.expand(graphs, members)
    if not sources:
        return [], {}, []
    parsed = [(link or "measured", Link.parse(link) if link else None) for link in links]
    problems, measurable, labels = [], {}, []
    for source in progress(sources, desc="profiling", unit="graph"):
        workload = load_workload(source, runtime, max_groups=max_groups, cache=cache)
        for name, link in parsed:
            problems += [workload.problem(n, link=link) for n in counts]
            labels += [{"graph": str(source), "devices": n, "link": name} for n in counts]
        if on_runtime:
            measurable[len(problems)] = MeasuredGraph(workload.graph, workload.profile_dir)
            problems.append(workload.problem())
            labels.append({"graph": str(source), "devices": problems[-1].n_devices,
                           "link": "runtime"})
    log.info("training on %d graphs x %d device counts x %d links%s = %d problems",
             len(sources), len(counts), len(links),
             " (and the runtime's own devices)" if on_runtime else "", len(problems))
    return problems, measurable, labels
