"""`tf-placeto train`: train the Placeto policy (tf_placeto.train) and say what it learned."""

from __future__ import annotations

import os

import numpy as np

from tf_placeto import choices, plots
from tf_placeto.cli.common import (EXIT_OK, cache_argument, count, device_count, link_argument,
                                   runtime_arguments, seconds, target_of)
from tf_placeto.training_api import TrainingPlan, train


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("train",
                                   help="train the Placeto policy on graphs (families)")
    parser.add_argument("--graphs", metavar="GRAPH", nargs="+", required=True,
                        help="SOURCEs to train on; examples:FAMILY stands for its members; "
                             "corpus, corpus:FAMILY or corpus:NAME for the corpus's compact "
                             "profiles (real models, nothing profiled: see --settings)")
    parser.add_argument("--settings", metavar="SETTING", nargs="+",
                        choices=list(choices.SETTINGS), default=list(TrainingPlan.settings),
                        help="the devices the corpus's graphs are posed on, each at every "
                             "--counts: " + ", ".join(choices.SETTINGS) + " (default "
                             + " ".join(TrainingPlan.settings) + "; docs/design/policy.md)")
    parser.add_argument("--without", metavar="FAMILY", nargs="+", default=[],
                        help="corpus families left out, to judge the policy on them unseen")
    parser.add_argument("--members", metavar="A-B", default=TrainingPlan.members,
                        help="which members of each family (default all), e.g. 0-23 to hold "
                             "24-31 out for evaluating transfer")
    parser.add_argument("--counts", metavar="N", type=device_count, nargs="+", required=True,
                        help="device counts to train for (devices like the profiled ones)")
    parser.add_argument("--out", metavar="DIR", required=True,
                        help="where the checkpoints, summaries and exported policy go: a new "
                             "or empty folder, or one a run trained in, which resumes from its "
                             "newest whole checkpoint; any other folder is refused")
    parser.add_argument("--max-groups", type=count(1), default=TrainingPlan.max_groups,
                        metavar="N",
                        help="group each graph into at most N groups (default "
                             f"{TrainingPlan.max_groups}: an episode visits every group, so "
                             "fewer train faster; the policy places any number)")
    parser.add_argument("--steps", metavar="N", type=count(0), default=TrainingPlan.steps,
                        help="training iterations in all, counting those DIR already did "
                             f"(default {TrainingPlan.steps})")
    parser.add_argument("--episodes", metavar="K", type=count(1), default=TrainingPlan.episodes,
                        help=f"parallel episodes per iteration (default {TrainingPlan.episodes})")
    parser.add_argument("--imitate", metavar="EPOCHS", type=count(0), default=TrainingPlan.imitate,
                        help="before the iterations, teach the policy the best decision known "
                             "for each problem (the fast placers' best; see --imitate-climb and "
                             "--imitate-exact) "
                             "for EPOCHS passes (behaviour cloning; default 0: none)")
    parser.add_argument("--keep-imitating", metavar="K", type=count(0),
                        default=TrainingPlan.keep_imitating,
                        help="during the iterations, imitation goes on as a regulariser: after "
                             "an iteration on a problem where the policy's greedy episode "
                             "ends slower than its lesson (its decision to imitate, or a "
                             "placement an episode met at least 1%% faster), K batches of "
                             "that problem's demonstrations (default 0: none)")
    parser.add_argument("--keep-imitating-where", choices=choices.IMITATE_WHERE,
                        default=TrainingPlan.keep_imitating_where,
                        help="which iterations --keep-imitating follows: 'behind' (the "
                             "default), where the greedy episode ends slower than the lesson; "
                             "'one-device', every iteration on a problem whose lesson is on "
                             "one device, and no other")
    parser.add_argument("--imitate-climb", metavar="S", type=seconds,
                        default=TrainingPlan.imitate_climb,
                        help="climb each problem's best fast decision in the simulator for up "
                             "to S seconds (the hill_climb placer) and teach the climbed "
                             "decision where it is faster (default: not asked)")
    parser.add_argument("--imitate-exact", metavar="S", type=seconds,
                        default=TrainingPlan.imitate_exact,
                        help="give the exact placer S seconds per problem: where it proves its "
                             "decision optimal and that decision simulates faster than the "
                             "fast placers' best (or the climbed one), imitation teaches it "
                             "instead (default: not asked)")
    parser.add_argument("--imitate-own", metavar="X", type=float,
                        default=TrainingPlan.imitate_own,
                        help="with --warm-start DIR: where DIR's own greedy decision "
                             "simulates within X times the best decision known (1.1: 10%% "
                             "slower), imitation follows DIR's own moves instead, so that "
                             "the network is corrected only where DIR falls short (default: "
                             "not asked)")
    parser.add_argument("--imitate-greedy", action="store_true",
                        help="with --imitate-own X: where the simulator's greedy pass (each "
                             "group to the device the simulator says is fastest) ends faster "
                             "than DIR's own decision, and within X times the best known, "
                             "imitation follows that pass instead")
    parser.add_argument("--imitate-veto", metavar="MARGIN", type=float,
                        default=TrainingPlan.imitate_veto,
                        help="with --imitate-own X: another teacher, DIR's own moves except "
                             "where the simulator finds another device's step shorter by "
                             "more than MARGIN (in the group's own run times, arcsinh-"
                             "scaled; 0: any), there that device; followed where it ends "
                             "fastest and within X times the best known (default: not asked)")
    parser.add_argument("--dagger", metavar="PASSES", nargs="?", type=count(1), const=1,
                        default=TrainingPlan.dagger,
                        help="with --imitate: before each epoch, walk the network's own "
                             "greedy episodes too and teach the lesson where they lead "
                             "(DAgger), on every problem whose lesson is not the warm "
                             "start's own moves; with PASSES > 1, walks of up to PASSES "
                             "passes over the groups (as place --passes), the later passes "
                             "taught the lesson's decision on every problem")
    parser.add_argument("--real-steps", metavar="N", type=count(0),
                        default=TrainingPlan.real_steps,
                        help="after the simulated iterations, N more on each graph on the "
                             "runtime's own devices, whose episodes' returns are measured for "
                             "real (their starts and ends timed in turns, logged with the "
                             "profile's real runs; default 0: none)")
    parser.add_argument("--algorithm", choices=["reinforce", "ppo"],
                        default=TrainingPlan.algorithm)
    parser.add_argument("--embedding", metavar="D", type=count(1),
                        default=TrainingPlan.embedding,
                        help="the network's width: each group's embedding (default "
                             f"{TrainingPlan.embedding}, as the shipped policy)")
    parser.add_argument("--rounds", metavar="R", type=count(1), default=TrainingPlan.rounds,
                        help="the network's rounds of message passing (default "
                             f"{TrainingPlan.rounds}); fewer train faster and see less far")
    parser.add_argument("--step-change-weight", metavar="W", type=float,
                        default=TrainingPlan.step_change_weight,
                        help="the weight of the network's direct path from each device's "
                             "simulated step change to its score, as the run begins (default: "
                             "the --warm-start network's own; 0 in a new network or where the "
                             "warm start has no such path); trained from there. A resumed "
                             "run keeps its checkpoint's")
    parser.add_argument("--warm-start", metavar="DIR", nargs="+",
                        default=TrainingPlan.warm_start,
                        help="a new run starts from the weights of the policy trained in DIR (a "
                             "--out directory, or tf_placeto/policy/pretrained): what its "
                             "network learned carries over where the observation has gained "
                             "inputs since (they start at zero); a resumed run keeps its own. "
                             "Of several DIRs, the mean of their weights (a model soup: "
                             "networks trained from one start average well; with --steps 0 "
                             "that mean is the policy)")
    parser.add_argument("--start", choices=choices.START_KINDS, nargs="+",
                        default=list(TrainingPlan.starts),
                        help="where the episodes start: random (default), the Placeto paper's "
                             "random placement; fast, the fast placers' best decision, for a "
                             "policy that learns to improve it (as `place` uses it by default); "
                             "single, every group on the best device; several: every problem "
                             "is posed from each")
    link_argument(parser, several=True)
    runtime_arguments(parser, default="local:2")
    cache_argument(parser)
    parser.add_argument("--seed", type=count(0), default=TrainingPlan.seed,
                        help="the run's seed: first weights, starts, samples and imitation "
                             "batches (default 0)")
    parser.set_defaults(handler=run)


def run(args) -> int:
    plan = TrainingPlan(
        graphs=args.graphs, counts=args.counts, out=args.out, members=args.members,
        max_groups=args.max_groups, links=args.link or (None,), settings=args.settings,
        without=args.without, steps=args.steps,
        episodes=args.episodes, imitate=args.imitate, keep_imitating=args.keep_imitating,
        keep_imitating_where=args.keep_imitating_where, imitate_climb=args.imitate_climb,
        imitate_exact=args.imitate_exact, imitate_own=args.imitate_own,
        imitate_greedy=args.imitate_greedy, imitate_veto=args.imitate_veto,
        dagger=args.dagger, real_steps=args.real_steps,
        algorithm=args.algorithm, embedding=args.embedding, rounds=args.rounds,
        step_change_weight=args.step_change_weight, warm_start=args.warm_start,
        starts=args.start, seed=args.seed)
    result = train(plan, target_of(args))
    imitation, history = result.log["imitation"], result.log["iterations"]
    if imitation:
        print(f"after {len(imitation)} epochs of imitation, the policy's likeliest "
              f"device was the demonstrated one in {imitation[-1]['accuracy']:.1%} of "
              "the moves")
    if history:
        kinds = result.starts
        posed = f" from {len(kinds)} starts each ({', '.join(kinds)})" if len(kinds) > 1 else ""
        print(f"trained {len(history)} iterations on {result.problems} problems{posed}; "
              f"best placements {history[-1]['best_speedup']:.3f}x faster than one device "
              "on average (simulated)")
        settings = result.by_setting()
        if len(settings) > 1 or settings["imitated"].any():
            print("by setting (imitated: iterations followed by imitation batches):")
            print(settings.to_string(index=False, float_format="{:+.3f}".format))
        real = [row for row in history if "real_return" in row]
        if real:
            print(f"{len(real)} iterations measured for real: their episodes' real speed-up "
                  f"over their starts {np.mean([r['real_return'] for r in real]):+.1%} on "
                  f"average, simulated {np.mean([r['simulated_return'] for r in real]):+.1%}")
    if not imitation and not history and plan.composes:
        network = (f"the mean of the weights of {len(plan.warm_start)} networks "
                   f"({', '.join(plan.warm_start)})" if plan.averages
                   else f"the network of {plan.warm_start[0]}")
        if plan.step_change_weight is not None:
            network += (" with its path from the step change weighed "
                        f"{plan.step_change_weight:g}")
        print(f"{network}, trained no further")
    weight = result.log.get("step_change_weight")
    if weight is not None and (imitation or history):
        began = "" if plan.step_change_weight is None else f", from {plan.step_change_weight:g}"
        print(f"its path from the step change weighs {weight:.3f} now{began}")
    curve = plots.learning_curve(result.log, os.path.join(args.out, "learning_curve.png"))
    print(f"policy: {result.policy}")
    print(f"learning curve: {curve}")
    return EXIT_OK
