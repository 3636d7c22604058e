"""Static checks on bootstrap/: ShellCheck on every script, the shared conventions, the prolog's
instance table against hpcflow's catalog, and example cluster specs pointing at scripts that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from hpcflow.pcluster.catalog import _TABLE

REPO = Path(__file__).resolve().parents[3]
BOOTSTRAP = REPO / "bootstrap"
SCRIPTS = sorted(BOOTSTRAP.rglob("*.sh"))
STEPS = sorted((BOOTSTRAP / "steps").glob("*.sh"))


def test_there_is_an_entry_script_and_numbered_steps():
    assert (BOOTSTRAP / "hpcflow-bootstrap.sh").is_file()
    assert [p.name for p in STEPS] == ["10-efa.sh", "20-nccl.sh", "30-nccl-tests.sh",
                                       "40-enroot-pyxis.sh", "50-spot-watch.sh", "90-healthcheck.sh"]


@pytest.mark.parametrize("script", [pytest.param(p, id=str(p.relative_to(BOOTSTRAP))) for p in SCRIPTS])
def test_shellcheck_is_clean(script: Path):
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck not found (scripts/install.sh --dev installs it)"
    proc = subprocess.run([shellcheck, "-x", "-P", str(REPO), script.name], cwd=script.parent,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("script", [pytest.param(p, id=str(p.relative_to(BOOTSTRAP))) for p in SCRIPTS])
def test_script_conventions(script: Path):
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    if script.parent.name != "lib":
        assert "\nset -Eeuo pipefail\n" in text
        assert 'if [[ "${BASH_SOURCE[0]}" == "${0}" ]]; then\n  main "$@"\nfi' in text
        assert "--dry-run" in text
    assert not re.search(r"local \w+=\$\(", text), "write `local x; x=$(cmd)`"


def _prolog_table() -> dict[str, tuple[int, int]]:
    text = (BOOTSTRAP / "prolog/hpcflow-health.sh").read_text()
    return {m[1]: (int(m[2]), int(m[3]))
            for m in re.finditer(r'^\s+([a-z0-9.-]+)\) echo "(\d+) (\d+)" ;;$', text, re.M)}


def test_prolog_table_matches_the_instance_catalog():
    want = {r.instance_type: (0 if r.accelerator.startswith("Trainium") else r.accelerator_count,
                              r.max_efa_interfaces) for r in _TABLE}
    assert _prolog_table() == want


def test_cuda_gencode_lists_each_compute_capability_once(tmp_path: Path):
    stub = tmp_path / "nvidia-smi"
    stub.write_text("#!/bin/sh\nprintf '9.0\\n8.0\\n9.0\\n'\n")
    stub.chmod(0o755)
    proc = subprocess.run(
        ["bash", "-c", f'source "{BOOTSTRAP}/lib/common.sh"; cuda_gencode'],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ("-gencode=arch=compute_80,code=sm_80 "
                                   "-gencode=arch=compute_90,code=sm_90")


def test_example_specs_point_at_scripts_that_exist():
    seen = 0
    for spec in sorted((REPO / "pcluster_configs").glob("*.spec.yaml")):
        doc = yaml.safe_load(spec.read_text())
        for actions in (doc.get("bootstrap") or {}).values():
            for action in actions or []:
                script = action["script"]
                name = script.rsplit("/", 1)[-1]
                assert (BOOTSTRAP / name).is_file(), f"{spec.name}: {script} is not in bootstrap/"
                steps = action.get("args", [])
                if "--steps" in steps:
                    for step in steps[steps.index("--steps") + 1].split(","):
                        assert step in {"efa", "nccl", "nccl-tests", "enroot-pyxis", "spot-watch",
                                        "healthcheck"}
                seen += 1
    assert seen >= 1


@pytest.mark.parametrize("item", ["PATH=/tmp", "HPCFLOW_X=a\nb", "hpcflow_x=1"])
def test_bootstrap_env_takes_only_hpcflow_settings(item: str):
    from click.testing import CliRunner

    from hpcflow.cli.main import cli

    result = CliRunner().invoke(cli, ["bootstrap", "--hosts", "h1", "--env", item])
    assert result.exit_code == 2, result.output
    assert "--env" in result.output and "HPCFLOW_NAME=VALUE" in result.output
