"""The corpus's placement problems: each compact profile on each setting of devices, at each
device count, for training the policy and judging it on families it never saw.

The corpus (tf_placeto/examples/corpus.py) is profiled on two logical CPUs of one process
(measure/build_corpus.py). A setting says what other devices the same graph meets:
- "one_process": devices like the profiled ones, joined by the link measured between them;
- "k80": GPUs of one machine joined by Placeto's K80 links (25 us, 7,600 bytes/us);
- "nvlink": GPUs of one machine joined by NVLink-class links (5 us, 50,000 bytes/us);
- "cluster": tasks of a cluster, with what a local cluster's calibrated profile measured of
  the runtime (CLUSTER_RUNTIME: its link, and the cost per task, per crossing tensor and per
  message that a split pays there), the graph's own op times;
- "cluster_k80": the same cluster's tasks joined by K80-class links instead (a cluster with a
  fast network: crossing tensors cost little, each task and message still costs as there);
- "mixed": K80-linked GPUs of which every other one runs each op twice as slowly
  (heterogeneous devices).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from typing import Iterable, Optional, Sequence

import numpy as np

from tf_placeto.errors import InputError
from tf_placeto.examples import audit
from tf_placeto.examples.corpus import PROFILES
from tf_placeto.measure.costs.costmodel import Link
from tf_placeto.placers.compact import SUFFIX, CompactProfile
from tf_placeto.placers.problem import PlacementProblem

CLUSTER_RUNTIME = "cluster_runtime.json"     # beside the profiles: measure/build_corpus.py
MIXED_SLOWDOWN = 2.0


@dataclasses.dataclass(frozen=True)
class Setting:
    """One kind of devices: how they are linked, whether they are a cluster's tasks, and how
    much slower than the profiled device every other one is."""

    name: str
    link: Optional[str] = None          # Link.parse's text; None: the profile's own
    tasks: bool = False                 # a cluster's tasks (CLUSTER_RUNTIME's costs)
    every_other_slower: float = 1.0

    def problem(self, profile: CompactProfile, n_devices: int,
                cluster: Optional[dict] = None) -> PlacementProblem:
        """`profile`'s problem on `n_devices` devices of this setting (cluster: the
        CLUSTER_RUNTIME of the "cluster" setting, read from the corpus's folder if None)."""
        if self.tasks:
            profile = profile.on_tasks(cluster or cluster_runtime())
        slowdown = np.where(np.arange(n_devices) % 2 == 1, self.every_other_slower, 1.0)
        return profile.problem(n_devices, Link.parse(self.link) if self.link else None,
                               slowdown=slowdown)


SETTINGS = {setting.name: setting for setting in (
    Setting("one_process"), Setting("k80", link="k80"),
    Setting("nvlink", link="machine:5:50000"), Setting("cluster", tasks=True),
    Setting("cluster_k80", link="25:7600", tasks=True),
    Setting("mixed", link="k80", every_other_slower=MIXED_SLOWDOWN))}


@dataclasses.dataclass
class CorpusProblem:
    """One problem of the corpus, with what it is: its graph, family, setting and devices."""

    graph: str
    family: str
    setting: str
    devices: int
    problem: PlacementProblem

    def label(self) -> dict:
        return {"graph": self.graph, "family": self.family, "setting": self.setting,
                "devices": self.devices}


def setting(name: str) -> Setting:
    if name not in SETTINGS:
        raise InputError(f"unknown setting {name!r}; settings: {', '.join(SETTINGS)}")
    return SETTINGS[name]


def load_profiles(folder: Optional[str] = None, families: Optional[Iterable[str]] = None,
                  names: Optional[Iterable[str]] = None,
                  without: Iterable[str] = ()) -> list:
    """The compact profiles in `folder` (default: the corpus shipped with the package), in
    name order: those of `families` or `names` if given, never those of the families
    `without`. InputError for a family or name the folder does not hold."""
    folder = folder or PROFILES
    profiles = [CompactProfile.load(path)
                for path in sorted(glob.glob(os.path.join(folder, "*" + SUFFIX)))]
    if not profiles:
        raise InputError(f"{folder}: no compact profiles (*{SUFFIX}); build them with "
                         "`python -m measure.build_corpus --out DIR`")
    for kind, asked, known in (("family", families, {p.family for p in profiles}),
                               ("family", without, {p.family for p in profiles}),
                               ("model", names, {p.name for p in profiles})):
        unknown = sorted(set(asked or ()) - known)
        if unknown:
            raise InputError(f"no {kind} {', '.join(unknown)} in {folder} (there: "
                             f"{', '.join(sorted(known))})")
    without = set(without)
    return [p for p in profiles if p.family not in without
            and (families is None or p.family in set(families))
            and (names is None or p.name in set(names))]


def corpus_problems(profiles: Sequence[CompactProfile], settings: Sequence[str],
                    counts: Sequence[int]) -> list:
    """A CorpusProblem for every profile x setting x device count, in that order."""
    chosen = [setting(name) for name in settings]
    cluster = cluster_runtime() if any(s.tasks for s in chosen) else None
    return [CorpusProblem(profile.name, profile.family, s.name, n, s.problem(profile, n, cluster))
            for profile in profiles for s in chosen for n in counts]


def named_problems(texts: Sequence[str]) -> list:
    """The CorpusProblem of each MODEL:SETTING:DEVICES (e.g. lstm:one_process:4), the model
    one of the corpus's or of the audit set's (the two share no name); InputError for a text
    of another form or a model neither holds."""
    asked = [text.split(":") for text in texts]
    for text, parts in zip(texts, asked):
        if len(parts) != 3 or not parts[2].isdigit():
            raise InputError(f"{text!r}: a problem is MODEL:SETTING:DEVICES, "
                             "e.g. lstm:one_process:4")
    named = {model for model, _, _ in asked}
    audited = named & set(audit.MODELS)
    found = load_profiles(audit.PROFILES, names=audited) if audited else []
    if named - audited:
        found += load_profiles(names=named - audited)
    profiles = {p.name: p for p in found}
    return [posed for model, setting_name, devices in asked
            for posed in corpus_problems([profiles[model]], [setting_name], [int(devices)])]


def cluster_runtime(folder: Optional[str] = None) -> dict:
    """What a local cluster's calibrated profile measured of its runtime (CLUSTER_RUNTIME)."""
    path = os.path.join(folder or PROFILES, CLUSTER_RUNTIME)
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: no cluster runtime to simulate a cluster's tasks with "
                         f"({error}); `python -m measure.build_corpus --out DIR "
                         "--cluster-runtime` measures it") from None
