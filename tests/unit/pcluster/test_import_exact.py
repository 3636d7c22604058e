"""``hpcflow cluster import`` renders back exactly what it read: every config the tests hold that
the real ParallelCluster schema accepts imports, and the imported spec renders it back equal as
data, field for field. Nothing is added: a config without ``Region`` comes back without it
(ParallelCluster takes the region from ``pcluster --region`` or the environment then; the region
hpcflow checks in is the spec's, not the config's).

The configs: ``configs_without_region/`` (in the style of AWS's public samples), the configs
hpcflow ships (``pcluster_configs/*.cluster.yaml``), and each shipped config with its ``Region``
taken out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.pcluster.importer import import_config
from hpcflow.pcluster.render import check_spec
from hpcflow.pcluster.schema import schema_check
from hpcflow.resources import data_dir
from hpcflow.spec.cluster import ClusterSpec

HERE = Path(__file__).parent
FILES = (sorted((HERE / "configs_without_region").glob("*.yaml"))
         + sorted(data_dir("pcluster_configs").glob("*.cluster.yaml")))


def _without_region(cfg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in cfg.items() if k != "Region"}


CASES = [pytest.param(yaml.safe_load(p.read_text()), id=p.stem) for p in FILES]
CASES += [pytest.param(_without_region(yaml.safe_load(p.read_text())), id=f"{p.stem}-no-region")
          for p in FILES if "Region" in yaml.safe_load(p.read_text())]


def test_the_configs_cover_both_kinds():
    with_region = [p for p in FILES if "Region" in yaml.safe_load(p.read_text())]
    assert len(with_region) >= 5 and len(FILES) - len(with_region) >= 4


@pytest.mark.parametrize("cfg", CASES)
def test_every_config_the_schema_accepts_imports_and_renders_back_equal(cfg):
    assert [f for f in schema_check(cfg, region="eu-west-1") if f.level == "error"] == []
    spec = import_config(cfg, "t", region="eu-west-1")
    result = check_spec(ClusterSpec.model_validate(spec))
    assert result.errors == [], [str(f) for f in result.errors]
    assert result.config == cfg
    assert ("Region" in result.config) == ("Region" in cfg)
    assert spec["region"] == cfg.get("Region", "eu-west-1")


def test_import_then_render_through_the_cli_gives_the_file_back(tmp_path: Path):
    source = HERE / "configs_without_region" / "simple-slurm.yaml"
    env = {"AWS_DEFAULT_REGION": "ap-south-1", "AWS_REGION": None, "AWS_PROFILE": None,
           "AWS_CONFIG_FILE": None, "HOME": str(tmp_path)}
    spec, back = tmp_path / "s.yaml", tmp_path / "back.yaml"
    r = CliRunner().invoke(cli, ["cluster", "import", str(source), "-o", str(spec)], env=env)
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["cluster", "render", str(spec), "-o", str(back)], env=env)
    assert r.exit_code == 0, r.output
    assert yaml.safe_load(back.read_text()) == yaml.safe_load(source.read_text())
    assert "Region" not in back.read_text()
