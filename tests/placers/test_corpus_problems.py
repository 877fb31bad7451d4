"""The corpus's problems: each shipped compact profile posed on each setting of devices."""

import shutil

import numpy as np
import pytest

from tf_placeto.errors import InputError
from tf_placeto.placers import corpus_problems
from tf_placeto.placers.corpus_problems import (SETTINGS, cluster_runtime, load_profiles,
                                                setting)


@pytest.fixture(scope="module")
def lookup():
    [profile] = load_profiles(names=["lookup"])
    return profile


def test_the_profiles_are_chosen_by_family_and_name_and_a_family_is_left_out():
    profiles = load_profiles()
    families = {p.family for p in profiles}
    assert len(profiles) >= 30 and len(families) >= 15
    assert {p.name for p in load_profiles(families=["recurrent"])} == {"lstm", "gru"}
    without = load_profiles(without=["recurrent", "enas_ptb"])
    assert len(without) == len(profiles) - 4
    assert not {"recurrent", "enas_ptb"} & {p.family for p in without}
    with pytest.raises(InputError, match="no family nonesuch in .* \\(there: .*recurrent"):
        load_profiles(families=["nonesuch"])
    with pytest.raises(InputError, match="no model nonesuch"):
        load_profiles(names=["nonesuch"])


def test_an_empty_folder_and_a_missing_cluster_runtime_say_how_to_build_them(tmp_path):
    with pytest.raises(InputError, match="no compact profiles .*measure.build_corpus"):
        load_profiles(str(tmp_path))
    with pytest.raises(InputError, match="no cluster runtime .*--cluster-runtime"):
        cluster_runtime(str(tmp_path))
    with pytest.raises(InputError, match="unknown setting 'gpus'; settings: one_process"):
        setting("gpus")


def test_each_setting_poses_its_devices(lookup):
    problems = {name: s.problem(lookup, 4) for name, s in SETTINGS.items()}
    assert all(p.n_devices == 4 and p.n_groups == lookup.meta["groups"]
               for p in problems.values())
    one_machine = ("one_process", "k80", "nvlink", "mixed")
    assert all(problems[name].device_names[1] == "/device:CPU:1" for name in one_machine)
    # GPUs of one machine pay no RunGraph call per device (one process's calibration may)
    assert all(problems[name].simulation.remote_task_us == 0 for name in one_machine[1:])
    assert problems["k80"].latency_us[0, 1] == 25 and problems["k80"].bytes_per_us[0, 1] == 7600
    assert problems["nvlink"].bytes_per_us[0, 1] == 50_000
    cluster, measured = problems["cluster"], cluster_runtime()
    assert [name.rsplit("/", 2)[-2] for name in cluster.device_names] == [
        f"task:{k}" for k in range(4)]
    assert cluster.simulation.remote_task_us == measured["calibration"]["remote_task_us"] > 0
    assert cluster.simulation.task_message_us == measured["calibration"]["message_us"]
    # the same tasks and costs on a fast network: only the link differs
    fast = problems["cluster_k80"]
    assert fast.device_names == cluster.device_names
    assert fast.simulation.remote_task_us == cluster.simulation.remote_task_us
    assert fast.bytes_per_us[0, 1] == 7600 > cluster.bytes_per_us[0, 1]
    assert fast.latency_us[0, 1] < cluster.latency_us[0, 1]     # 25 us, not the measured link's
    # every other device of the mixed setting takes twice as long over every op
    mixed = problems["mixed"].simulation
    np.testing.assert_array_equal(mixed.device_type_of, [0, 1, 0, 1])
    np.testing.assert_allclose(mixed.compute_us[:, 1], 2 * mixed.compute_us[:, 0])
    [lstm] = load_profiles(names=["lstm"])          # its ops' time outweighs their overhead
    mixed = SETTINGS["mixed"].problem(lstm, 2)
    on_fast, on_slow = (mixed.simulate(np.full(mixed.n_groups, d)).step_time_us for d in (0, 1))
    assert on_slow > 1.5 * on_fast


def test_a_cluster_runtime_carries_its_costs_and_keeps_the_graphs_op_times(lookup):
    measured = cluster_runtime()
    on_tasks = lookup.on_tasks(measured)
    assert on_tasks.meta["devices"] == measured["devices"]
    own, theirs = lookup.meta["calibration"], on_tasks.meta["calibration"]
    assert theirs["compute_scale"] == own["compute_scale"]
    assert theirs["copy_us"] == measured["calibration"]["copy_us"]
    assert lookup.meta["devices"] == ["/device:CPU:0", "/device:CPU:1"]     # unchanged


def test_every_profile_setting_and_count_is_one_labelled_problem(lookup, tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name in ("lookup.npz", "lstm.npz", corpus_problems.CLUSTER_RUNTIME):
        shutil.copy(f"{corpus_problems.PROFILES}/{name}", folder)
    profiles = load_profiles(str(folder))
    posed = corpus_problems.corpus_problems(profiles, ["k80", "one_process"], [2, 3])
    assert [p.label() for p in posed][:3] == [
        {"graph": "lookup", "family": "lookup", "setting": "k80", "devices": 2},
        {"graph": "lookup", "family": "lookup", "setting": "k80", "devices": 3},
        {"graph": "lookup", "family": "lookup", "setting": "one_process", "devices": 2}]
    assert len(posed) == 8 and posed[-1].graph == "lstm" and posed[-1].problem.n_devices == 3


def test_a_problem_is_named_by_model_setting_and_devices_of_the_corpus_or_the_audit_set():
    """The corpus's models and the audit set's, in the order asked."""
    posed = corpus_problems.named_problems(["siamese:k80:2", "lookup:one_process:4"])
    assert [(p.graph, p.family, p.setting, p.devices) for p in posed] == [
        ("siamese", "siamese", "k80", 2), ("lookup", "lookup", "one_process", 4)]
    with pytest.raises(InputError, match="a problem is MODEL:SETTING:DEVICES"):
        corpus_problems.named_problems(["lookup:k80"])
    with pytest.raises(InputError, match="no model nonesuch"):
        corpus_problems.named_problems(["nonesuch:k80:2"])
