"""``cluster import`` of configs without ``Region:`` (most public ones): the region comes from
``--region``, the environment or the AWS config file, as ParallelCluster takes it, and the
import says which; the imported spec renders the config back exactly, still without ``Region``
(ParallelCluster takes it at create time; the spec's region is for hpcflow's checks).

The configs in ``configs_without_region/`` are written here in the style of AWS's public samples
(user guide examples, ML samples, workshop configs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.errors import SpecError
from hpcflow.pcluster.region import find_region
from hpcflow.pcluster.render import check_spec
from hpcflow.pcluster.schema import schema_check
from hpcflow.spec.cluster import ClusterSpec

CONFIGS = sorted((Path(__file__).parent / "configs_without_region").glob("*.yaml"))
AWS_VARS = ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
            "AWS_CONFIG_FILE")


@pytest.fixture
def clean_env(tmp_path: Path) -> dict[str, str | None]:
    """An environment with no AWS region anywhere: no variables, an empty HOME."""
    env: dict[str, str | None] = {k: None for k in AWS_VARS}
    env["HOME"] = str(tmp_path / "home")
    return env


def _import(config: Path, env: dict[str, str | None], *extra: str):
    r = CliRunner().invoke(cli, ["cluster", "import", str(config), *extra], env=env)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    return r


def test_there_are_several_sample_configs_and_none_has_a_region():
    assert len(CONFIGS) >= 4
    for path in CONFIGS:
        assert "Region" not in yaml.safe_load(path.read_text()), path


@pytest.mark.parametrize("config", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_a_config_without_region_imports_and_round_trips(tmp_path: Path, clean_env, config):
    out = tmp_path / "cluster.spec.yaml"
    r = _import(config, {**clean_env, "AWS_DEFAULT_REGION": "eu-west-1"}, "-o", str(out))
    assert r.exit_code == 0, r.output
    assert "region: eu-west-1 (from AWS_DEFAULT_REGION; the config has no Region:)" in r.output
    spec = yaml.safe_load(out.read_text())
    assert spec["region"] == "eu-west-1"
    assert spec["pcluster"]["Region"] is None  # the render leaves Region out
    assert "from AWS_DEFAULT_REGION" in out.read_text().split("\n\n")[0]  # the header says so
    result = check_spec(ClusterSpec.model_validate(spec))
    assert result.errors == [], [str(f) for f in result.errors]
    assert result.config == yaml.safe_load(config.read_text())
    assert "Region" not in result.config
    assert [f for f in schema_check(result.config) if f.level == "error"] == []


def test_render_of_the_imported_spec_adds_no_region(tmp_path: Path, clean_env):
    spec = tmp_path / "s.yaml"
    r = _import(CONFIGS[0], clean_env, "--region", "ap-northeast-1", "-o", str(spec))
    assert r.exit_code == 0, r.output
    assert "region: ap-northeast-1 (from --region" in r.output
    out = tmp_path / "back.yaml"
    r = CliRunner().invoke(cli, ["cluster", "render", str(spec), "-o", str(out)], env=clean_env)
    assert r.exit_code == 0, r.output
    assert yaml.safe_load(out.read_text()) == yaml.safe_load(CONFIGS[0].read_text())


def test_the_json_answer_names_the_region_and_its_source(clean_env):
    import json

    r = _import(CONFIGS[0], {**clean_env, "AWS_REGION": "us-east-2"}, "--json")
    doc = json.loads(r.output)
    assert doc["ok"] and doc["data"]["region"] == {"region": "us-east-2", "source": "AWS_REGION"}


def test_no_region_anywhere_is_a_clear_error(clean_env):
    r = _import(CONFIGS[0], clean_env)
    assert r.exit_code == 2
    assert "the config has no Region, and neither --region, AWS_DEFAULT_REGION, AWS_REGION nor " \
           "the AWS config file names one; pass --region REGION" in r.output
    assert "Field required" not in r.output


def _aws_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "aws-config"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("cfg_region, cli, env, file_text, want", [
    pytest.param("us-east-1", "us-west-2", {"AWS_DEFAULT_REGION": "eu-west-1"}, None,
                 ("us-east-1", "the config's Region"), id="config-wins"),
    pytest.param(None, "us-west-2", {"AWS_DEFAULT_REGION": "eu-west-1"}, None,
                 ("us-west-2", "--region"), id="cli-over-env"),
    pytest.param(None, None, {"AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "eu-west-2"},
                 None, ("eu-west-1", "AWS_DEFAULT_REGION"), id="default-region-first"),
    pytest.param(None, None, {"AWS_REGION": "eu-west-2"}, "[default]\nregion = us-east-2\n",
                 ("eu-west-2", "AWS_REGION"), id="env-over-file"),
    pytest.param(None, None, {}, "[default]\nregion = us-east-2\n",
                 ("us-east-2", "(profile default)"), id="file-default-profile"),
    pytest.param(None, None, {"AWS_PROFILE": "ml"},
                 "[default]\nregion = us-east-2\n[profile ml]\nregion = ap-south-1\n",
                 ("ap-south-1", "(profile ml)"), id="file-named-profile"),
])
def test_the_region_is_found_where_parallelcluster_looks(tmp_path: Path, cfg_region, cli, env,
                                                         file_text, want):
    environ = dict(env, HOME=str(tmp_path))
    if file_text is not None:
        environ["AWS_CONFIG_FILE"] = _aws_config(tmp_path, file_text)
    cfg = {"Region": cfg_region} if cfg_region else {}
    found = find_region(cfg, cli, environ)
    assert found.region == want[0] and want[1] in found.source


@pytest.mark.parametrize("cli, env, expected", [
    pytest.param("us-east-9", {}, "region 'us-east-9' from --region: not an AWS region", id="cli"),
    pytest.param(None, {"AWS_DEFAULT_REGION": "mars-1"},
                 "region 'mars-1' from AWS_DEFAULT_REGION", id="env"),
])
def test_an_unsupported_region_names_where_it_came_from(tmp_path: Path, cli, env, expected):
    with pytest.raises(SpecError, match=expected):
        find_region({}, cli, dict(env, HOME=str(tmp_path)))


def test_an_unreadable_aws_config_file_is_no_region(tmp_path: Path):
    environ = {"HOME": str(tmp_path), "AWS_CONFIG_FILE": _aws_config(tmp_path, "not [ini\n")}
    with pytest.raises(SpecError, match="the config has no Region"):
        find_region({}, None, environ)
