"""Device names: parsing, canonical form, existence checks with helpful errors."""

import pytest

from tf_placeto.devices import (MAX_LOGICAL_CPUS, DeviceSet, canonical_device, memory_amount,
                                parse_device)
from tf_placeto.errors import DeviceError, InputError


@pytest.mark.parametrize("text, canonical", [
    ("/device:CPU:1", "/device:CPU:1"),
    ("/cpu:1", "/device:CPU:1"),
    ("CPU:1", "/device:CPU:1"),
    ("/job:localhost/replica:0/task:0/device:CPU:1", "/device:CPU:1"),
    ("/job:worker/replica:0/task:1/device:GPU:0", "/job:worker/replica:0/task:1/device:GPU:0"),
    ("/job:worker/task:1/device:GPU:0", "/job:worker/replica:0/task:1/device:GPU:0"),
    ("/job:worker/task:3/gpu:2", "/job:worker/replica:0/task:3/device:GPU:2"),
])
def test_canonical_names(text, canonical):
    assert canonical_device(text) == canonical


@pytest.mark.parametrize("text", ["banana", "", "/device:CPU", "/job:worker", "/job:worker/device:CPU:0"])
def test_names_that_are_not_one_device(text):
    with pytest.raises(DeviceError):
        parse_device(text)


def test_this_machine_lists_what_exists_when_asked_for_a_missing_gpu():
    here = DeviceSet.this_machine()
    assert here.check("/cpu:3") == "/device:CPU:3"         # logical CPUs can be made
    with pytest.raises(DeviceError, match=r"/device:CPU:0"):
        here.check("/device:GPU:7")


def test_a_count_means_local_accelerators_or_logical_cpus():
    devices = DeviceSet.parse("3")
    assert len(devices) == 3
    assert devices.device_types <= {"CPU", "GPU"}


def test_explicit_remote_devices_are_taken_as_declared():
    devices = DeviceSet.parse("/job:worker/task:0/device:CPU:0,/job:worker/task:1/device:CPU:0")
    assert devices.names == ["/job:worker/replica:0/task:0/device:CPU:0",
                             "/job:worker/replica:0/task:1/device:CPU:0"]
    with pytest.raises(DeviceError, match="task:0/device:CPU:0"):
        devices.check("/job:worker/task:2/device:CPU:0")
    with pytest.raises(DeviceError):
        DeviceSet.parse("/device:GPU:9")                    # local, and not here


@pytest.mark.parametrize("text", ["/device:CPU:-1", "/device:CPU:99999999999999999999",
                                  "/job:worker/task:-2/device:CPU:0"])
def test_indices_tensorflow_cannot_use_are_refused(text):
    with pytest.raises(DeviceError, match="index"):
        parse_device(text)


def test_logical_cpus_are_bounded_with_the_reason():
    """TensorFlow would make /device:CPU:2147483647 and every CPU before it (terabytes)."""
    here = DeviceSet.this_machine()
    last = f"/device:CPU:{MAX_LOGICAL_CPUS - 1}"
    assert here.check(last) == last
    for text in (f"/device:CPU:{MAX_LOGICAL_CPUS}", "/device:CPU:2147483647"):
        with pytest.raises(DeviceError, match=f"at most {MAX_LOGICAL_CPUS} logical CPUs in one "
                                              "process .*: they all share its cores"):
            here.check(text)
    if not here.device_types - {"CPU"}:                 # a count means GPUs where there are
        assert len(DeviceSet.parse(str(MAX_LOGICAL_CPUS))) == MAX_LOGICAL_CPUS
        with pytest.raises(DeviceError, match="100000 logical CPU devices asked for: at most"):
            DeviceSet.parse("100000")


@pytest.mark.parametrize("text, message", [
    ("1e999GB", "is more than any memory: at most 8 EiB"),
    ("1e300TiB", "is more than any memory"),
    ("9" * 400, "is more than any memory"),
    ("0", "must be positive"),
    ("nan", "give bytes"),
    ("inf", "give bytes"),
])
def test_memory_amounts_are_finite_positive_byte_counts(text, message):
    with pytest.raises(InputError, match=message) as raised:
        memory_amount(text, "memory cap")
    assert "\n" not in str(raised.value)
    assert memory_amount("2GiB", "memory cap") == (2.0, 2**30, "GiB")
