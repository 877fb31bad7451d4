"""This machine: its fingerprint, and cores claimed for local workers across processes."""

import logging
import os
import subprocess
import sys
import textwrap
import time

import pytest

from tests.helpers import REPO
from tf_placeto.measure.runtimes import machine

_CLAIM_ALL = textwrap.dedent("""
    import sys, time
    from tf_placeto.measure.runtimes.machine import CoreClaim, usable_cores
    claim = CoreClaim(len(usable_cores()), poll_s=0.05)
    print(",".join(map(str, claim.cores)), flush=True)
    time.sleep(float(sys.argv[1]))
    claim.release()
""")


def _claiming_child(hold_s):
    return subprocess.Popen([sys.executable, "-c", _CLAIM_ALL, str(hold_s)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": REPO})


@pytest.fixture
def holding_nothing():
    assert not machine._holds, "this process holds cores already: run the test alone"
    yield
    assert not machine._holds


def test_a_claim_waits_for_cores_another_process_holds_and_says_so(holding_nothing, caplog):
    holder = _claiming_child(1.5)
    try:
        assert holder.stdout.readline().strip()             # it holds every core now
        start = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="tf_placeto"):
            claim = machine.CoreClaim(len(machine.usable_cores()), poll_s=0.05)
        waited = time.monotonic() - start
        claim.release()
    finally:
        holder.wait(timeout=30)
    assert waited > 0.5
    assert f"pid {holder.pid}" in caplog.text and "another tf-placeto process" in caplog.text
    assert len(caplog.records) == 1                         # said once, not per poll


def test_the_clusters_of_one_process_and_its_children_share_its_cores(holding_nothing):
    cores = machine.usable_cores()
    first = machine.CoreClaim(len(cores))
    second = machine.CoreClaim(1)                           # this process: no wait
    assert second.cores[0] in first.cores
    start = time.monotonic()
    child = _claiming_child(0.0)                            # started by the holder: shares
    try:
        assert child.stdout.readline().strip() == ",".join(map(str, first.cores))
    finally:
        child.wait(timeout=30)
    assert time.monotonic() - start < 20
    second.release()
    first.release()
    more_workers_than_cores = machine.CoreClaim(len(cores) + 1)
    more_workers_than_cores.release()
    assert more_workers_than_cores.cores == [cores[i % len(cores)]
                                             for i in range(len(cores) + 1)]   # round robin


def test_the_fingerprint_names_what_makes_a_step_time_this_machines():
    fingerprint = machine.machine_fingerprint()
    assert fingerprint["cores"] == len(machine.usable_cores()) >= 1
    assert fingerprint["host"] and fingerprint["cpu"] and fingerprint["tensorflow"]
    assert isinstance(fingerprint["gpus"], list)
