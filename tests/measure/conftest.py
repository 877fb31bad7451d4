"""Fixtures shared by the measurement tests."""

import pytest

import tf_placeto as tp
from tf_placeto.measure.runtimes.local import LocalCluster
from tf_placeto.measure.runtimes.runtime import Runtime


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes on this machine, stopped after the module."""
    with LocalCluster(2) as local:
        yield local


@pytest.fixture(scope="module")
def graph(mlp_model):
    """The MLP's op graph: the usual subject of a measurement test (a module may override)."""
    return tp.import_graph(mlp_model)


@pytest.fixture(scope="module")
def runtime():
    """Two logical CPUs of this process."""
    return Runtime.local(tp.DeviceSet.local(2))
