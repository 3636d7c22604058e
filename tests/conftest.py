"""Fixtures every test folder may use.

``imds``: a fake EC2 instance metadata service on loopback (``tests/programs/fake_imds.py``:
IMDSv2 tokens required, 404 until a spot notice is posted), stopped after the test.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "fake_imds", Path(__file__).resolve().parent / "programs" / "fake_imds.py")
fake_imds = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(fake_imds)


@pytest.fixture
def imds():
    """A started fake metadata service (``.url``, control paths under ``/_fake/``)."""
    server = fake_imds.start()
    yield server
    server.shutdown()
    server.server_close()


CLUSTER_FIXTURES = ("local_cluster", "launch_cluster")


def pytest_collection_modifyitems(config, items):  # noqa: ANN001, ANN201
    """A test that uses the local Slurm cluster, wherever it lives, is a ``slurm`` test:
    ``pytest -m "not slurm"`` leaves it out, so tests/run.sh can spread the others over several
    workers while the cluster's tests run one at a time."""
    for item in items:
        if any(name in item.fixturenames for name in CLUSTER_FIXTURES):
            item.add_marker(pytest.mark.slurm)
