"""Fixtures shared by the measurement tests."""

import pytest

from tf_placeto.measure.runtimes.local import LocalCluster


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes on this machine, stopped after the module."""
    with LocalCluster(2) as local:
        yield local
