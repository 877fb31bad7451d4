"""A training run's folder on disk: its checkpoints, the state saved with each, its log.

Everything lives under one directory, which holds nothing else (check_training_folder):
`checkpoints/` (agent, optimizer, step: `ckpt-N`, numbered on from every one before),
`state/` (`ckpt-N.json`, each checkpoint's log and baselines),
`summaries/` (TensorBoard), `policy/` (the greedy policy exported with TF-Agents'
PolicySaver: a SavedModel that runs without tf-agents) and `training.json` (the configuration,
each imitation epoch and what each iteration found), which `tf-placeto train` draws as
`learning_curve.png`. One process trains in a folder at a time (hold).

A save is one unit, so that a run killed at any point resumes whole: every checkpoint but the
one the run went on from (whole) is removed, then the new one's state file is written
(atomically), then its files (fsync'd), then training.json, a readable copy of the log
(atomically). A run resumes from the newest checkpoint that is whole (its files read back,
checksums and all, and its state file parses) with that checkpoint's log and baselines; each
one passed over is named in one line. A checkpoint of an older version, without a state file,
takes its log from training.json and its baselines from checkpoints/baselines.json. `policy/`
is exported into a staging folder and swapped in (files.Staging): it is always a whole
SavedModel, the old one or the new.

Nothing here loads TensorFlow until a checkpoint is read or written, so that a training
folder is checked before TensorFlow starts.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from tf_placeto.errors import InputError
from tf_placeto.files import FileLock, fsync_folder, fsync_tree, holder_pid, write_atomically
from tf_placeto.policy.baselines import Baselines

CHECKPOINTS, STATE, SUMMARIES, POLICY, LOG = ("checkpoints", "state", "summaries", "policy",
                                              "training.json")
BASELINES = "baselines.json"       # in CHECKPOINTS: an older version's (state/ keeps them now)
_CHECKPOINT_NAME = re.compile(r"ckpt-(\d+)")    # then .index, .data-*, _temp/ or .json

log = logging.getLogger(__name__)


def check_training_folder(out: str) -> None:
    """Refuse to train in `out` where it holds something else: training writes its files
    there (policy/, learning_curve.png, ...) and must not take the place of a user's. A
    missing or empty folder starts a run; one with checkpoints/ or training.json resumes."""
    if not os.path.exists(out):
        return
    if not os.path.isdir(out):
        raise InputError(f"--out {out}: a file, not a folder to train in")
    if os.listdir(out) and not (os.path.isdir(os.path.join(out, CHECKPOINTS))
                                or os.path.isfile(os.path.join(out, LOG))):
        raise InputError(f"--out {out}: holds files and is not a training folder (no "
                         f"{CHECKPOINTS}/ or {LOG}); give a new or empty folder, or one that "
                         "a run trained in")


def hold(out: str) -> None:
    """One process trains in `out` at a time (each save removes the checkpoints it did not
    write): the folder's lock, which this process keeps until it ends (re-entrant: its own
    trainers may resume there)."""
    os.makedirs(os.path.join(out, CHECKPOINTS), exist_ok=True)    # marks a training folder
    lock = FileLock(os.path.join(out, ".lock"), f"the training in {out}")
    if not lock.acquire(wait=False):
        raise InputError(f"--out {out}: another tf-placeto process (pid "
                         f"{holder_pid(lock.path) or 'unknown'}) trains there")


def state_path(prefix: str) -> str:
    """The state file of the checkpoint `prefix` (out/checkpoints/ckpt-N): out/state/ckpt-N.json."""
    out = os.path.dirname(os.path.dirname(prefix))
    return os.path.join(out, STATE, os.path.basename(prefix) + ".json")


def save(out: str, checkpoint, state: dict, kept: Optional[str]) -> str:
    """Save a run under `out` as one unit (the module's docstring): `checkpoint` (a
    tf.train.Checkpoint) as a new checkpoint, numbered past every one there so that nothing
    is written over, and `state` as its state file. Only `kept`, the checkpoint the run went
    on from, stays besides: older ones, ones passed over as damaged and what killed saves
    left go first. Returns the new checkpoint's prefix."""
    import tensorflow as tf  # heavy: loaded only where a checkpoint is written

    prefix = _next_checkpoint(out)
    _remove_checkpoints_but(out, [kept])
    write_atomically(state_path(prefix), lambda file: json.dump(state, file))
    checkpoint.write(prefix)
    for path in _checkpoint_files(prefix):
        fsync_tree(path)
    fsync_folder(os.path.dirname(prefix))
    names = [os.path.basename(p) for p in (kept, prefix) if p]
    # TensorFlow's own index (tf.train.latest_checkpoint), for tools that read the folder
    tf.compat.v1.train.update_checkpoint_state(os.path.dirname(prefix), names[-1], names)
    return prefix


def _checkpoint_files(prefix: str) -> list:
    folder, name = os.path.split(prefix)
    return [os.path.join(folder, entry) for entry in os.listdir(folder)
            if (match := _CHECKPOINT_NAME.match(entry)) and match.group() == name]


def _checkpoints(out: str) -> list:
    """The checkpoints saved under `out` (those with an index, whole or not), newest first."""
    folder = os.path.join(out, CHECKPOINTS)
    names = [entry.removesuffix(".index") for entry in _entries(folder)
             if entry.endswith(".index")]
    return sorted((os.path.join(folder, name) for name in names
                   if _CHECKPOINT_NAME.fullmatch(name)),
                  key=lambda prefix: int(prefix.rpartition("-")[2]), reverse=True)


def _next_checkpoint(out: str) -> str:
    """The prefix of the next checkpoint under `out`: numbered past every checkpoint and
    state file there, whole or not."""
    numbers = [int(match.group(1)) for folder in (CHECKPOINTS, STATE)
               for entry in _entries(os.path.join(out, folder))
               if (match := _CHECKPOINT_NAME.match(entry))]
    return os.path.join(out, CHECKPOINTS, f"ckpt-{max(numbers, default=0) + 1}")


def _entries(folder: str) -> list:
    return os.listdir(folder) if os.path.isdir(folder) else []


def _remove_checkpoints_but(out: str, kept: Sequence[Optional[str]]) -> None:
    """Remove every checkpoint under `out` but `kept`, with its state file, what killed
    saves left (parts of checkpoints, temporary state files) and an older version's
    baselines once no checkpoint kept needs them."""
    names = {os.path.basename(prefix) for prefix in kept if prefix}
    checkpoints, states = os.path.join(out, CHECKPOINTS), os.path.join(out, STATE)
    removed = [os.path.join(checkpoints, entry) for entry in os.listdir(checkpoints)
               if (match := _CHECKPOINT_NAME.match(entry)) and match.group() not in names]
    removed += [os.path.join(states, entry) for entry in os.listdir(states)
                if entry.removesuffix(".json") not in names]
    if all(os.path.isfile(state_path(os.path.join(checkpoints, name))) for name in names):
        removed += [path for path in [os.path.join(checkpoints, BASELINES)]
                    if os.path.isfile(path)]
    for path in removed:
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


class _Damaged(Exception):
    """Why a checkpoint or what goes with it cannot be read back whole."""


def newest_whole(out: str, read: Callable[[str], object]) -> tuple:
    """(prefix, read(prefix)) of the newest checkpoint under `out` whose files read back
    whole and for which `read` (what goes with it) raises no _Damaged; each one passed over
    is named in one line. (None, None) where nothing was saved; InputError where nothing
    saved is whole."""
    passed = []
    for prefix in _checkpoints(out):
        try:
            _read_back(prefix)
            return prefix, read(prefix)
        except _Damaged as damage:
            log.warning(f"{prefix} is damaged ({damage}): passed over for the one before it")
            passed.append(f"{os.path.basename(prefix)}: {damage}")
    if passed:
        raise InputError(f"{out}: none of its checkpoints is whole ({'; '.join(passed)}); "
                         "move it aside to start anew")
    return None, None


def _read_back(prefix: str) -> None:
    """Read every tensor of a checkpoint (their checksums checked): _Damaged where its files
    are cut short or corrupt."""
    import tensorflow as tf  # heavy: loaded only where a checkpoint is read

    try:
        reader = tf.train.load_checkpoint(prefix)
        for key in reader.get_variable_to_shape_map():
            reader.get_tensor(key)
    except (tf.errors.OpError, IndexError, ValueError) as error:
        raise _Damaged(str(error).strip().splitlines()[0]) from None


def saved_state(prefix: str) -> tuple:
    """(imitation epochs, iterations, baselines) saved with a checkpoint: from its state
    file; for an older version's checkpoint, from training.json and baselines.json, each
    named and left out where it does not parse (that layout kept one of each)."""
    path = state_path(prefix)
    if os.path.isfile(path):
        try:
            state = _read_json(path)
            imitation, iterations = state["imitation"], state["iterations"]
            if not isinstance(imitation, list) or not isinstance(iterations, list):
                raise ValueError("its log is not lists of rows")
            return imitation, iterations, Baselines.seen_from_json(state["baselines"])
        except (ValueError, KeyError, TypeError) as error:
            raise _Damaged(f"its state {path} does not parse: {error}") from None
    out = os.path.dirname(os.path.dirname(prefix))
    logged, baselines = {}, {}
    try:
        logged = read_log(os.path.join(out, LOG))
    except InputError as error:
        log.warning(f"{error}: resuming {prefix} without its log of iterations")
    path = os.path.join(os.path.dirname(prefix), BASELINES)
    if os.path.isfile(path):
        try:
            baselines = Baselines.seen_from_json(_read_json(path))
        except ValueError as error:
            log.warning(f"{path} does not parse ({error}): resuming {prefix} with new "
                        "baselines")
    return logged.get("imitation", []), logged.get("iterations", []), baselines


def warm_start_folders(given) -> Optional[tuple]:
    """The training folders a warm start names: one given as a string (as older logs name
    it), or several; None where none is given."""
    if given is None or isinstance(given, str):
        return None if given is None else (given,)
    return tuple(given) or None


def take_weights(folders: Sequence[str], networks: dict) -> None:
    """A warm start: the weights of `networks` (by their attribute names under the
    checkpoint's agent; None where this run has no such network) from the newest whole
    checkpoint of another run in each of `folders`; of several, the mean of each weight (a
    model soup: networks trained from one start, averaged, placed unseen graphs better than
    each: docs/results/generalisation.md). Where the observation has gained inputs since
    (appended last, as specs.py adds them), a weight matrix has more input rows than the old
    one: those rows start at zero, so the network starts out scoring as the old one did, and
    training finds their use."""
    taken = {}          # variable ref -> (variable, its weights in each folder)
    for folder in folders:
        for variable, weights in _weights_in(folder, networks):
            taken.setdefault(variable.ref(), (variable, []))[1].append(weights)
    for variable, weights in taken.values():
        if len(weights) != len(folders):
            raise InputError(f"--warm-start: {variable.name} is not in every one of "
                             f"{', '.join(folders)}: only networks of one kind average")
        variable.assign(np.mean(weights, axis=0))


def _weights_in(folder: str, networks: dict) -> list:
    """(variable of `networks`, its weights) for each weight of the newest whole checkpoint
    in `folder`, with zero rows for inputs the observation has gained since."""
    import tensorflow as tf  # heavy: loaded only where a checkpoint is read

    checkpoints = os.path.join(folder, CHECKPOINTS)
    prefix, _ = newest_whole(folder, lambda prefix: None)
    if prefix is None:
        raise InputError(f"--warm-start: no checkpoint in {checkpoints}")
    reader = tf.train.load_checkpoint(prefix)
    found = []
    for key, shape in reader.get_variable_to_shape_map().items():
        path = key.split("/")
        root = networks.get(path[1]) if path[0] == "agent" and len(path) > 2 else None
        if root is None or "OPTIMIZER_SLOT" in path:
            continue
        variable = _tracked(root, path[2:path.index(".ATTRIBUTES")])
        old, new = reader.get_tensor(key), tuple(variable.shape)
        if old.shape != new:
            if len(new) != 2 or old.shape[1] != new[1] or old.shape[0] > new[0]:
                raise InputError(f"--warm-start: {key} is {shape} in {checkpoints}, "
                                 f"{list(new)} here; only inputs appended to the "
                                 "observation carry over")
            old = np.concatenate([old, np.zeros((new[0] - old.shape[0], new[1]), old.dtype)])
        found.append((variable, old))
    if not found:
        raise InputError(f"--warm-start: {checkpoints} holds no policy network")
    return found


def _tracked(root, path: Sequence[str]):
    """The object at a checkpoint key's path below `root` (attributes, list indices, dict
    keys, as TensorFlow's object graph names them)."""
    for part in path:
        if hasattr(root, "keys") and part in root:
            root = root[part]
        elif part.isdigit():
            root = root[int(part)]
        else:
            root = getattr(root, part)
    return root


def read_log(path: str) -> dict:
    """A training.json ({"iterations": []} where there is none); InputError naming one that
    does not parse."""
    if not os.path.isfile(path):
        return {"iterations": []}
    try:
        logged = _read_json(path)
    except ValueError as error:
        raise InputError(f"{path} does not parse ({error})") from None
    if not isinstance(logged, dict):
        raise InputError(f"{path} is not a training log")
    return logged


def _read_json(path: str):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def iterations_by_setting(history: Sequence[dict]) -> pd.DataFrame:
    """Per link and start (the settings a run mixes): its iterations, their mean return, and
    after how many of them imitation went on (`keep_imitating`). Logs written before the
    iterations carried their link are read by start alone."""
    table = pd.DataFrame(history)
    keys = [key for key in ("link", "start") if key in table]
    imitated = (table["imitation_loss"].notna() if "imitation_loss" in table
                else pd.Series(False, index=table.index))
    return (table.assign(imitated=imitated).groupby(keys, sort=False)
            .agg(iterations=("iteration", "size"), imitated=("imitated", "sum"),
                 mean_return=("mean_return", "mean")).reset_index())
