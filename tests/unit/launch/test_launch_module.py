"""hpcflow.launch's lazy public names: listed by dir() (tab completion, help()) without importing
submitit or torch, and each one resolves."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import hpcflow.launch

PUBLIC = ["AutoExecutor", "Executor", "HpcflowJob", "Job", "JobEnvironment", "helpers"]


def test_dir_lists_every_lazy_public_name_without_importing_them():
    code = (
        "import json, sys\n"
        "import hpcflow.launch\n"
        "names = dir(hpcflow.launch)\n"
        "print(json.dumps([names, [m for m in ('submitit', 'torch') if m in sys.modules]]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(PUBLIC) <= set(names), names
    assert names == sorted(names)
    assert loaded == []


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in PUBLIC])
def test_each_listed_public_name_resolves(name):
    assert name in hpcflow.launch.__all__
    assert getattr(hpcflow.launch, name) is not None


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'hpcflow.launch' has no attribute 'Nope'"):
        hpcflow.launch.Nope  # noqa: B018
