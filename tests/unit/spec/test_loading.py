"""Spec plumbing shared by the job and cluster specs: YAML reading, overrides, error format."""

import pytest

from hpcflow.errors import SpecError
from hpcflow.spec.loading import apply_overrides, load_yaml_mapping


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param("nodes: 1\nnodes: 2\n", "key 'nodes' is given twice (lines 1 and 2)", id="dup-top"),
        pytest.param("a:\n  b: 1\n  b: 2\n", "key 'b' is given twice", id="dup-nested"),
        pytest.param("a: [1,\n", "not valid YAML (line", id="syntax"),
        pytest.param("- 1\n- 2\n", "must be a mapping", id="list"),
    ],
)
def test_bad_yaml_is_a_spec_error_naming_the_file(tmp_path, text, needle):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        load_yaml_mapping(path)
    assert needle in str(err.value) and str(path) in str(err.value)


def test_the_same_key_in_two_mappings_is_fine(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("a: {x: 1}\nb: {x: 2}\n")
    assert load_yaml_mapping(path) == {"a": {"x": 1}, "b": {"x": 2}}


def test_empty_file_is_an_empty_mapping(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("")
    assert load_yaml_mapping(path) == {}


def test_overrides_parse_yaml_values_and_create_mappings():
    out = apply_overrides({"nodes": 1}, ["nodes=4", "preemption.max_requeues=5", "env.X=", "a.b=[1, x]"])
    assert out == {"nodes": 4, "preemption": {"max_requeues": 5}, "env": {"X": ""},
                   "a": {"b": [1, "x"]}}


@pytest.mark.parametrize("item", ["nodes", "=3", ".nodes=3", "a..b=1"])
def test_malformed_override_is_refused(item):
    with pytest.raises(SpecError, match="KEY=VALUE"):
        apply_overrides({}, [item])


def test_override_into_a_scalar_is_refused():
    with pytest.raises(SpecError, match="nodes is not a mapping"):
        apply_overrides({"nodes": 1}, ["nodes.x=3"])
