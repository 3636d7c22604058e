"""NCCL/EFA environment presets: legacy values only for the plugin versions that need them."""

from __future__ import annotations

import pytest

from hpcflow.nccl.presets import (
    RULES,
    SOURCES,
    NodeFacts,
    Versions,
    node_facts,
    preset_env,
    version_tuple,
)


@pytest.mark.parametrize(("itype", "ofi", "want"), [
    pytest.param("p5.48xlarge", "1.17.3", {}, id="current-p5"),
    pytest.param("p4d.24xlarge", "1.7.4-aws", {}, id="1.7-p4d"),
    pytest.param("p4d.24xlarge", "1.6.0", {"FI_EFA_USE_DEVICE_RDMA": "1"}, id="1.6-p4d"),
    pytest.param("g5.48xlarge", "1.6.0", {}, id="1.6-g5-no-rdma"),
    pytest.param("p4d.24xlarge", "1.5.0", {"FI_PROVIDER": "efa", "NCCL_PROTO": "simple",
                                           "FI_EFA_USE_DEVICE_RDMA": "1"}, id="1.5-p4d"),
    pytest.param("g5.48xlarge", "1.4.0", {"FI_PROVIDER": "efa", "NCCL_PROTO": "simple"},
                 id="1.4-g5"),
    pytest.param("p5.48xlarge", None, {}, id="unknown-version"),
])
def test_legacy_values_only_where_the_plugin_needs_them(itype, ofi, want):
    preset = preset_env(itype, Versions(ofi_nccl=ofi), forking_workers=False)
    assert preset.env == want


def test_forking_workers_turn_off_huge_pages_on_efa_families_only():
    assert preset_env("p5.48xlarge", Versions("1.17.3")).env == {"FI_EFA_USE_HUGE_PAGE": "0"}
    assert preset_env("m5.2xlarge", Versions("1.17.3")).env == {}


@pytest.mark.parametrize("itype", ["p4d.24xlarge", "p5.48xlarge", "g5.48xlarge", "p5en.48xlarge"])
@pytest.mark.parametrize("ofi", ["1.0.0", "1.5.0", "1.6.1", "1.9.1-aws", "1.17.3", None])
def test_never_an_infiniband_variable_and_every_value_has_a_source(itype, ofi):
    preset = preset_env(itype, Versions(ofi_nccl=ofi))
    assert not [k for k in preset.env if k.startswith("NCCL_IB_")]
    for setting in preset.settings:
        assert setting.source in SOURCES and setting.why


def test_rules_table_never_names_an_ib_variable():
    assert not [s.name for r in RULES for s in r.settings if s.name.startswith("NCCL_IB")]


def test_old_libraries_on_p5_are_named_with_the_minimum():
    notes = preset_env("p5.48xlarge", Versions("1.7.0", "2.17.1-1", "1.28.0")).notes
    assert any("nccl 2.17.1 is older than 2.18.0" in n for n in notes)
    assert any("aws-ofi-nccl 1.7.0 is older than 1.7.2" in n for n in notes)
    assert any("efa-installer 1.28.0 is older than 1.29.0" in n for n in notes)


def test_unknown_family_says_there_is_nothing_to_set():
    preset = preset_env("c7i.large")
    assert preset.env == {} and "no NCCL/EFA preset" in preset.notes[0]


@pytest.mark.parametrize(("text", "want"), [("1.7.4-aws", (1, 7, 4)), ("2.18.5-1", (2, 18, 5)),
                                            ("v1.17.3", (1, 17, 3)), ("", None), ("abc", None)])
def test_version_tuple(text, want):
    assert version_tuple(text) == want


@pytest.mark.parametrize(("itype", "want"), [
    pytest.param("g5.xlarge", {}, id="g5-without-efa"),
    pytest.param("g5.48xlarge", {"FI_EFA_USE_HUGE_PAGE": "0"}, id="g5-with-efa"),
    pytest.param("p5.48xlarge", {"FI_EFA_USE_HUGE_PAGE": "0"}, id="p5"),
    pytest.param("trn1.32xlarge", {}, id="efa-without-nvidia-gpus"),
    pytest.param("c5n.18xlarge", {}, id="efa-cpu-only"),
    pytest.param("x9.nolarge", {}, id="unknown-type"),
])
def test_the_preset_follows_the_instance_facts_not_its_family(itype, want):
    assert preset_env(itype, Versions("1.17.3")).env == want


@pytest.mark.parametrize(("facts", "want"), [
    pytest.param(NodeFacts("g5.xlarge", 0, "A10G", 1, 1, "t"), {}, id="no-efa"),
    pytest.param(NodeFacts("g5.xlarge", 1, "A10G", 1, 1, "t"),
                 {"FI_PROVIDER": "efa", "NCCL_PROTO": "simple"}, id="efa-no-rdma"),
    pytest.param(NodeFacts("g5.xlarge", 4, "A100", 8, 4, "t"),
                 {"FI_PROVIDER": "efa", "NCCL_PROTO": "simple", "FI_EFA_USE_DEVICE_RDMA": "1"},
                 id="rdma-gpu"),
])
def test_given_facts_the_preset_is_pure(facts, want):
    assert preset_env("g5.xlarge", Versions("1.5.0"), forking_workers=False,
                      facts=facts).env == want


def test_a_type_without_efa_says_why_nothing_is_set():
    [note] = preset_env("g5.xlarge", Versions("1.5.0")).notes
    assert "no EFA in the instance facts" in note and "nothing to set" in note


def test_node_facts_come_from_the_catalog():
    p5 = node_facts("p5.48xlarge")
    assert (p5.efa_interfaces, p5.gpu, p5.nvidia_gpus, p5.network_cards) == (32, "H100", 8, 32)
    assert p5.rdma and not node_facts("g5.48xlarge").rdma
    assert node_facts("g5.xlarge").efa_interfaces == 0
    assert node_facts("no.such") is None
