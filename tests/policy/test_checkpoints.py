"""A training run's folder on disk: saves as one unit, resuming from the newest whole
checkpoint after a kill at any point of a save, older layouts, warm starts, the folder and
its lock, the log read by setting."""

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.helpers import REPO
from tf_placeto.errors import InputError
from tf_placeto.policy import checkpoints, specs
from tf_placeto.policy.checkpoints import check_training_folder, iterations_by_setting
from tf_placeto.policy.episode import Episode
from tf_placeto.policy.observation import GraphView
from tf_placeto.policy.training import Trainer, TrainingConfig


def test_the_log_is_read_by_setting():
    """What `train` prints: per link and start, how many iterations were followed by
    imitation; a log from before the rows carried their link is read by start."""
    history = [{"iteration": i + 1, "link": link, "start": start, "mean_return": ret,
                **({"imitation_loss": 0.5} if imitated else {})}
               for i, (link, start, ret, imitated) in enumerate([
                   ("k80", "random", 0.2, True), ("25:7600", "random", -0.1, False),
                   ("k80", "random", 0.4, False), ("k80", "fast", 0.0, True)])]
    table = iterations_by_setting(history)
    assert table[["link", "start", "iterations", "imitated"]].values.tolist() == [
        ["k80", "random", 2, 1], ["25:7600", "random", 1, 0], ["k80", "fast", 1, 1]]
    np.testing.assert_allclose(table["mean_return"], [0.3, -0.1, 0.0])
    old = iterations_by_setting([{k: v for k, v in row.items() if k != "imitation_loss"
                                  and k != "link"} for row in history])
    assert old[["start", "iterations", "imitated"]].values.tolist() == [
        ["random", 3, 0], ["fast", 1, 0]]


def test_a_warm_start_takes_an_older_networks_weights_and_scores_as_it_did(
        policy_problems, tmp_path, tiny, monkeypatch):
    """A network trained before the device rows gained their last column starts a new run:
    its weights carry over, the new column's at zero, so the new network scores every
    device as the old one did; weights that cannot carry over are refused."""
    old_dir = str(tmp_path / "old")
    with monkeypatch.context() as patched:
        patched.setattr(specs, "NUM_CANDIDATE_FEATURES", specs.NUM_CANDIDATE_FEATURES - 1)
        old = Trainer(policy_problems, old_dir, tiny)
        old.save()
    observation = {k: v[None] for k, v in Episode(GraphView(policy_problems[0])).observation()
                   .items()}
    observation["candidates"][..., -1] = 1.0          # the new column says something
    before = {**observation, "candidates": observation["candidates"][..., :-1]}
    old_logits = old.actor(before)[0].logits.numpy()
    other_seed = dataclasses.replace(tiny, seed=tiny.seed + 1)
    cold = Trainer(policy_problems, str(tmp_path / "cold"), other_seed)
    assert not np.allclose(cold.actor(observation)[0].logits.numpy(), old_logits)
    warm = Trainer(policy_problems, str(tmp_path / "warm"),
                   dataclasses.replace(other_seed, warm_start=old_dir))
    np.testing.assert_allclose(warm.actor(observation)[0].logits.numpy(), old_logits,
                               rtol=1e-5, atol=1e-6)
    wider = dataclasses.replace(tiny, embedding=tiny.embedding * 2, warm_start=old_dir)
    with pytest.raises(InputError, match="only inputs appended"):
        Trainer(policy_problems, str(tmp_path / "wider"), wider)


def test_a_warm_start_from_several_networks_takes_the_mean_of_their_weights(
        policy_problems, tmp_path, tiny):
    """A model soup: each weight the mean of the runs' (the same network, other seeds)."""
    folders = []
    for seed in (1, 2):
        folders.append(str(tmp_path / f"seed{seed}"))
        Trainer(policy_problems, folders[-1], dataclasses.replace(tiny, seed=seed)).save()
    ingredients = [Trainer(policy_problems, str(tmp_path / f"again{k}"),
                           dataclasses.replace(tiny, warm_start=folder))
                   for k, folder in enumerate(folders)]
    soup = Trainer(policy_problems, str(tmp_path / "soup"),
                   dataclasses.replace(tiny, warm_start=folders))
    first, second = (i.actor.weights for i in ingredients)
    assert not all(np.allclose(a.numpy(), b.numpy()) for a, b in zip(first, second))
    for mean, a, b in zip(soup.actor.weights, first, second):
        np.testing.assert_allclose(mean.numpy(), (a.numpy() + b.numpy()) / 2, rtol=1e-6)
    wider = str(tmp_path / "wider")
    Trainer(policy_problems, wider, dataclasses.replace(tiny, embedding=tiny.embedding * 2)).save()
    with pytest.raises(InputError, match="only inputs appended"):
        Trainer(policy_problems, str(tmp_path / "mixed"),
                dataclasses.replace(tiny, warm_start=[folders[0], wider]))


def _step_and_save(trainer, k):
    """A stand-in for iteration k, then a save: the log, the baselines and the train step
    (which the checkpoint keeps) all say k."""
    trainer.history.append({"iteration": k})
    trainer.baselines.seen = {"0": [np.full(3, float(k))]}
    trainer.step.assign(k)
    trainer.save()


def _assert_whole(trainer, k):
    """The run goes on from iteration k: its checkpoint, log, baselines and training.json
    agree."""
    assert trainer.iterations_done == int(trainer.step.numpy()) == k
    assert [row["iteration"] for row in trainer.history] == list(range(1, k + 1))
    np.testing.assert_array_equal(trainer.baselines.seen["0"], [np.full(3, float(k))])
    logged = json.load(open(os.path.join(trainer.out, "training.json")))
    assert logged["iterations"] == trainer.history


def _warnings(caplog) -> list:
    return [record.getMessage() for record in caplog.records
            if record.name.startswith("tf_placeto")]


def _cut_short(path):
    with open(path, "r+b") as file:
        file.truncate(os.path.getsize(path) // 2)


# The third save of a run, cut at each point: `out` is the run's folder.
@contextlib.contextmanager
def _killed_writing_the_state(monkeypatch, out):
    """Only the state file's temporary is there."""
    write_atomically = checkpoints.write_atomically

    def killed(path, write, **options):
        if os.path.dirname(path) != os.path.join(out, "state"):
            return write_atomically(path, write, **options)
        with open(os.path.join(out, "state", ".ckpt-3.json.x.tmp"), "w") as temporary:
            temporary.write("{")
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoints, "write_atomically", killed)
    yield


@contextlib.contextmanager
def _killed_writing_the_checkpoint(monkeypatch, out):
    """Before the checkpoint's files reached the disk: one of them is cut short."""
    def killed(path):
        _cut_short(path)
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoints, "fsync_tree", killed)
    yield


@contextlib.contextmanager
def _killed_before_the_log(monkeypatch, out):
    def killed(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "_write_log", killed)
    yield


@contextlib.contextmanager
def _state_cut_short_after(monkeypatch, out):
    """Saved whole, then the disk lost the state file's last blocks."""
    yield
    _cut_short(os.path.join(out, "state", "ckpt-3.json"))


@contextlib.contextmanager
def _index_cut_short_after(monkeypatch, out):
    yield
    _cut_short(os.path.join(out, "checkpoints", "ckpt-3.index"))


@pytest.mark.parametrize("cut, resumed_at, named", [
    pytest.param(_killed_writing_the_state, 2, False, id="writing the state"),
    pytest.param(_killed_writing_the_checkpoint, 2, True, id="writing the checkpoint"),
    pytest.param(_killed_before_the_log, 3, False, id="before training.json"),
    pytest.param(_state_cut_short_after, 2, True, id="state cut short"),
    pytest.param(_index_cut_short_after, 2, True, id="index cut short")])
def test_a_kill_during_a_save_resumes_from_the_last_whole_checkpoint(
        cut, resumed_at, named, policy_problems, tmp_path, tiny, monkeypatch, caplog):
    """Wherever a kill cuts the third save, the next run goes on from a checkpoint whose log
    and baselines are its own, naming in one line the checkpoint it passed over; its next
    save leaves two checkpoints and their state files, and nothing a killed save left."""
    out = str(tmp_path / "run")
    trainer = Trainer(policy_problems, out, tiny)
    for k in (1, 2):
        _step_and_save(trainer, k)
    with monkeypatch.context() as patched, contextlib.suppress(KeyboardInterrupt), \
            cut(patched, out):
        _step_and_save(trainer, 3)
    with caplog.at_level(logging.WARNING, logger="tf_placeto"):
        resumed = Trainer(policy_problems, out, tiny)
    _assert_whole(resumed, resumed_at)
    warned = _warnings(caplog)
    if named:
        assert len(warned) == 1 and "\n" not in warned[0]
        assert warned[0].startswith(f"{out}/checkpoints/ckpt-3 is damaged (")
    else:
        assert warned == []
    _step_and_save(resumed, resumed_at + 1)
    _assert_whole(Trainer(policy_problems, out, tiny), resumed_at + 1)
    names = [state.removesuffix(".json") for state in os.listdir(os.path.join(out, "state"))]
    assert len(names) == 2
    assert sorted(os.listdir(os.path.join(out, "checkpoints"))) == sorted(
        ["checkpoint"] + [f"{name}.{part}" for name in names
                          for part in ("index", "data-00000-of-00001")])


def test_a_folder_without_a_whole_checkpoint_is_named_in_one_line(policy_problems, tmp_path,
                                                                   tiny):
    out = str(tmp_path / "run")
    _step_and_save(Trainer(policy_problems, out, tiny), 1)
    _cut_short(os.path.join(out, "checkpoints", "ckpt-1.data-00000-of-00001"))
    with pytest.raises(InputError, match="none of its checkpoints is whole") as refused:
        Trainer(policy_problems, out, tiny)
    assert "\n" not in str(refused.value)


def test_a_torn_baselines_file_of_an_older_version_is_named_not_a_crash(
        policy_problems, tmp_path, tiny, caplog):
    """An older version's folder (no state/; its baselines in checkpoints/baselines.json,
    rewritten in place) whose baselines a kill tore: the run goes on from its checkpoint and
    log, with new baselines."""
    out = str(tmp_path / "run")
    trainer = Trainer(policy_problems, out, tiny)
    for k in (1, 2):
        _step_and_save(trainer, k)
    shutil.rmtree(os.path.join(out, "state"))
    baselines = os.path.join(out, "checkpoints", "baselines.json")
    with open(baselines, "w") as file:
        file.write(json.dumps(trainer.baselines.as_json())[:10])
    with caplog.at_level(logging.WARNING, logger="tf_placeto"):
        resumed = Trainer(policy_problems, out, tiny)
    assert resumed.iterations_done == int(resumed.step.numpy()) == 2
    assert resumed.baselines.seen == {}
    assert [baselines in warning for warning in _warnings(caplog)] == [True]


def test_the_shipped_training_folder_resumes_and_a_warm_start_takes_its_weights(
        policy_problems, tmp_path):
    """tf_placeto/policy/pretrained is a whole training folder: its checkpoint and state
    resume where its training stopped (one epoch of imitation from the soup of three, its
    path from the step change trained from 1, no iterations), and a warm start that gives no
    weight of its own takes the same weights."""
    shipped = os.path.join(REPO, "tf_placeto", "policy", "pretrained")
    out = str(tmp_path / "pretrained")
    for part in ("checkpoints", "state"):
        shutil.copytree(os.path.join(shipped, part), os.path.join(out, part))
    shutil.copy(os.path.join(shipped, "training.json"), out)
    config = TrainingConfig(**json.load(open(os.path.join(out, "training.json")))["config"])
    resumed = Trainer(policy_problems, out, config)
    warm = Trainer(policy_problems, str(tmp_path / "warm"), dataclasses.replace(
        config, seed=1, warm_start=shipped, step_change_weight=None))
    for taken, shipped_weight in zip(warm.actor.weights, resumed.actor.weights):
        np.testing.assert_array_equal(taken.numpy(), shipped_weight.numpy())
    assert len(resumed.imitation) == 1 and resumed.iterations_done == 0
    assert config.step_change_weight == 1.0
    # trained from 1 to 0.94 (docs/results/generalisation.md); the resumed log says so
    assert round(float(resumed.actor.step_change_weight), 2) == 0.94
    logged = json.load(open(os.path.join(out, "training.json")))
    assert logged["step_change_weight"] == float(resumed.actor.step_change_weight)


def test_an_older_versions_folder_resumes_and_saves_in_this_layout(policy_problems, tmp_path,
                                                                   tiny):
    """An older version's folder (no state/: its log in training.json, its baselines in
    checkpoints/baselines.json): its checkpoint, log and baselines resume; a save writes this
    version's unit beside the older files, which the next run takes."""
    out = str(tmp_path / "run")
    trainer = Trainer(policy_problems, out, tiny)
    for k in (1, 2):
        _step_and_save(trainer, k)
    shutil.rmtree(os.path.join(out, "state"))
    with open(os.path.join(out, "checkpoints", "baselines.json"), "w") as file:
        json.dump(trainer.baselines.as_json(), file)
    resumed = Trainer(policy_problems, out, tiny)
    assert resumed.iterations_done == int(resumed.step.numpy()) == 2
    assert resumed.baselines.as_json() == trainer.baselines.as_json()
    resumed.save()
    assert "baselines.json" in os.listdir(os.path.join(out, "checkpoints"))  # kept, whole
    assert os.listdir(os.path.join(out, "state")) == ["ckpt-3.json"]
    again = Trainer(policy_problems, out, tiny)
    assert again.iterations_done == int(again.step.numpy()) == 2
    assert again.baselines.as_json() == resumed.baselines.as_json()


def test_a_training_folder_is_new_empty_or_one_a_run_trained_in(tmp_path):
    check_training_folder(str(tmp_path / "new"))
    check_training_folder(str(tmp_path))                       # empty
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "learning_curve.png").write_bytes(b"")
    check_training_folder(str(tmp_path))
    with pytest.raises(InputError, match="a file, not a folder"):
        check_training_folder(str(tmp_path / "learning_curve.png"))


def test_one_process_trains_in_a_folder_at_a_time(policy_problems, tmp_path):
    """Each save removes the checkpoints it did not write: a second process is refused."""
    out = str(tmp_path / "run")
    os.makedirs(os.path.join(out, "checkpoints"))
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from tf_placeto.files import FileLock
            with FileLock({os.path.join(out, ".lock")!r}):
                print("held", flush=True)
                time.sleep(60)
        """)], cwd=REPO, env={**os.environ, "PYTHONPATH": REPO}, stdout=subprocess.PIPE,
        text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(InputError, match=f"another tf-placeto process \\(pid {holder.pid}"):
            Trainer(policy_problems, out, TrainingConfig(episodes=1))
    finally:
        holder.kill()
        holder.wait()
    Trainer(policy_problems, out, TrainingConfig(episodes=1))        # free again
