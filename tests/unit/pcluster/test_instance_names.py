"""Real EC2 instance types versus names that are no type at all.

botocore's EC2 service model lists every name EC2 accepts; hpcflow's facts (ec2_types.tsv and
the offline table, dated) cover fewer. A name botocore lists is real: a config using one that
hpcflow has no facts for gets a warning that says which checks cannot run, never "not known"
with a wrong suggestion. A name no list has is an error with the nearest real name."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcflow.errors import SpecError
from hpcflow.pcluster.catalog import (
    FACTS_DATED,
    FACTS_RECORDED,
    Catalog,
    ec2_types,
    gpu_instance,
    instance_type_problem,
)
from hpcflow.pcluster.rules import run_rules
from hpcflow.pcluster.type_names import botocore_names

OLD_GENERATIONS = ["p3.2xlarge", "p3.8xlarge", "p3.16xlarge", "p2.xlarge", "g3.4xlarge",
                   "f1.2xlarge", "dl1.24xlarge"]


def _config(instance_type: str, efa: bool = False) -> dict:
    cr = {"Name": "cr", "InstanceType": instance_type, "MinCount": 0, "MaxCount": 2}
    if efa:
        cr["Efa"] = {"Enabled": True}
    return {"Region": "us-east-1", "Image": {"Os": "alinux2023"},
            "HeadNode": {"InstanceType": "c5.xlarge",
                         "Networking": {"SubnetId": "subnet-0123456789abcdef0"}},
            "Scheduling": {"Scheduler": "slurm", "SlurmQueues": [{
                "Name": "q", "ComputeResources": [cr],
                "Networking": {"SubnetIds": ["subnet-0123456789abcdef0"],
                               "PlacementGroup": {"Enabled": True}}}]}}


def _codes(cfg: dict) -> list[tuple[str, str]]:
    return [(f.level, f.code) for f in run_rules(cfg, Catalog.offline())]


def test_botocore_lists_every_type_the_facts_table_has():
    names, source = botocore_names()
    assert "botocore" in source and "EC2 service model" in source
    assert set(ec2_types()) <= names
    assert len(names) > len(ec2_types())


@pytest.mark.parametrize("name", OLD_GENERATIONS)
def test_old_generation_types_are_real_without_facts(name):
    cat = Catalog.offline()
    assert cat.known(name) and not cat.has_facts(name)


@pytest.mark.parametrize("name", OLD_GENERATIONS)
def test_a_real_type_without_facts_is_a_warning_naming_the_checks_that_cannot_run(name):
    findings = run_rules(_config(name, efa=True), Catalog.offline())
    assert "UNKNOWN_INSTANCE_TYPE" not in {f.code for f in findings}
    [warning] = [f for f in findings if f.code == "NO_INSTANCE_FACTS"]
    assert warning.level == "warning" and warning.value == name
    assert f"{name!r} is a real EC2 instance type, but hpcflow has no facts for it" \
        in warning.message
    assert FACTS_DATED in warning.message
    assert "the EFA checks and the flexible Instances checks skip it" in warning.message
    assert f"--family {name.split('.')[0]} --refresh" in warning.message
    assert not any(f.level == "error" for f in findings), [f.message for f in findings]


@pytest.mark.parametrize("name, near", [
    pytest.param("p5.48xl", "p5.48xlarge", id="cut-short"),
    pytest.param("p3.2xlarg", "p3.2xlarge", id="old-generation-typo"),
    pytest.param("g6e.99xlarge", None, id="no-such-size"),
])
def test_a_name_that_is_no_type_is_an_error_with_the_nearest_real_name(name, near):
    findings = [f for f in run_rules(_config(name), Catalog.offline())
                if f.code == "UNKNOWN_INSTANCE_TYPE"]
    assert len(findings) == 1 and findings[0].level == "error"
    assert f"{name!r} is not known; " in findings[0].message
    assert "no EC2 instance type has this name" in findings[0].message
    if near:
        assert f"did you mean {near!r}?" in findings[0].message


def test_instance_type_problem_tells_the_two_apart():
    cat = Catalog.offline()
    real = instance_type_problem("p3.2xlarge", cat, "its GPUs", "give --gpus-per-node")
    assert real.startswith("'p3.2xlarge' is a real EC2 instance type, but hpcflow has no facts")
    assert real.endswith("so its GPUs are not known; give --gpus-per-node")
    fake = instance_type_problem("p3.2xlarg", cat, "its GPUs")
    assert fake == ("'p3.2xlarg' is not known (no EC2 instance type has this name); did you "
                    "mean 'p3.2xlarge'?")


def test_gpus_of_a_real_type_without_facts_say_how_to_get_them(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("HPCFLOW_CACHE_DIR", str(tmp_path))
    with pytest.raises(SpecError, match=r"--instance-type: 'p3\.8xlarge' is a real EC2 instance "
                                        r"type, but hpcflow has no facts for it .*--family p3 "
                                        r"--refresh"):
        gpu_instance("--instance-type", "p3.8xlarge", "us-east-1")


def test_the_facts_table_is_dated_with_its_source():
    header = (Path(__import__("hpcflow.pcluster.catalog", fromlist=["x"]).__file__)
              .with_name("ec2_types.tsv").read_text().splitlines()[:2])
    assert "as recorded in moto 5.2.5" in header[0] and "moto 5.2.5" in FACTS_DATED
    assert header[1].startswith(f"# recorded {FACTS_RECORDED};")
    assert FACTS_RECORDED in FACTS_DATED


def test_doctor_on_a_node_of_a_real_type_without_facts_says_so():
    from hpcflow.doctor.checks import check_instance

    real = check_instance("p3.16xlarge", "instance metadata")
    assert real.level == "warn"
    assert "'p3.16xlarge' is a real EC2 instance type, but hpcflow has no facts" in real.message
    assert real.message.endswith("the GPU and EFA checks cannot run")
    fake = check_instance("p3.16xlarg", "--instance-type")
    assert "is not known (no EC2 instance type has this name); did you mean 'p3.16xlarge'?" \
        in fake.message


@pytest.mark.parametrize("name, text", [
    pytest.param("dl1.24xlarge", "'dl1.24xlarge' is a real EC2 instance type, but hpcflow has no "
                 "facts", id="real"),
    pytest.param("dl1.24xlarg", "'dl1.24xlarg' is not known (no EC2 instance type has this "
                 "name); did you mean 'dl1.24xlarge'?", id="typo"),
])
def test_doctor_nccl_tells_a_real_type_from_a_typo(name, text):
    from click.testing import CliRunner

    from hpcflow.cli.main import cli

    r = CliRunner().invoke(cli, ["doctor", "nccl", "--instance-type", name])
    assert r.exit_code == 2, r.output
    assert f"--instance-type: {text}" in " ".join(r.output.split())
    assert "Traceback" not in r.output


def test_the_admin_guide_dates_the_facts_as_the_code_does():
    docs = Path(__file__).resolve().parents[3] / "docs"
    text = " ".join((docs / "admin-guide.md").read_text().split())
    assert f"as recorded in moto 5.2.5, taken {FACTS_RECORDED}" in text
    assert "no EC2 instance type has this name" in text
