"""Where NCCL's loader must look for the plugin: the bootstrap's recorded dir, the EFA installer's
dirs, after the user's own entries, each only if it exists."""

from __future__ import annotations

import fnmatch

import pytest

from hpcflow.nccl.plugin_path import candidate_dirs, joined_path, plugin_ld_library_path

TREE = ["/r/opt/amazon/ofi-nccl/lib", "/r/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu",
        "/r/opt/amazon/ofi-nccl/lib64", "/r/opt/amazon/efa/lib", "/r/opt/amazon/efa/lib64",
        "/r/opt/hpcflow/aws-ofi-nccl/1.17.3/lib"]


def expand(pattern: str) -> list[str]:
    return [p for p in TREE if fnmatch.fnmatch(p, pattern) and "/" not in p[len(pattern) - 1:]]


def test_the_order_of_the_candidates():
    assert candidate_dirs("/r", "/r/opt/hpcflow/aws-ofi-nccl/1.17.3/lib\n", expand) == [
        "/r/opt/hpcflow/aws-ofi-nccl/1.17.3/lib", "/r/opt/amazon/ofi-nccl/lib",
        "/r/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu", "/r/opt/amazon/ofi-nccl/lib64",
        "/r/opt/amazon/efa/lib", "/r/opt/amazon/efa/lib64"]
    assert candidate_dirs("/r", None, lambda _: []) == []


@pytest.mark.parametrize("current, dirs, want", [
    pytest.param(None, ["/a", "/b"], "/a:/b", id="user-had-none"),
    pytest.param("/mine", ["/a"], "/mine:/a", id="after-the-users-own"),
    pytest.param("/a:/mine", ["/a", "/b"], "/a:/mine:/b", id="never-repeated"),
    pytest.param("/mine", ["/missing"], "/mine", id="only-existing-dirs"),
    pytest.param("", [], "", id="nothing"),
])
def test_joined_path(current, dirs, want):
    assert joined_path(current, dirs, is_dir=lambda d: d != "/missing") == want


def test_the_recorded_dir_is_read_under_the_sandbox_root(tmp_path):
    plugin = tmp_path / "opt/hpcflow/aws-ofi-nccl/1.17.3/lib"
    plugin.mkdir(parents=True)
    state = tmp_path / "var/lib/hpcflow/bootstrap"
    state.mkdir(parents=True)
    (state / "ofi-nccl.dir").write_text(f"{plugin}\n")
    env = {"HPCFLOW_BOOTSTRAP_PREFIX": str(tmp_path), "LD_LIBRARY_PATH": "/mine"}
    assert plugin_ld_library_path(env) == f"/mine:{plugin}"
