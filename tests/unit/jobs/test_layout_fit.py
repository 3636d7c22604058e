"""``submit`` and ``--dry-run`` check the layout against GPU memory when the spec names the
model's shape (``parallelism.model``): the planner's figures (hpcflow plan layout), refused
before the job waits in the queue, or warned with ``if_unfit: warn``."""

from __future__ import annotations

import json

import pytest

from hpcflow.errors import SpecError
from hpcflow.jobs.fit import check_fit, fit_warning
from hpcflow.plan.layout import plan_layouts
from hpcflow.plan.models import PRESETS
from hpcflow.spec.job import JobSpec


def spec(nodes: int, parallelism: dict | None, network: str | None = "p5.48xlarge") -> JobSpec:
    data = {"name": "j", "time_limit": "10", "run_dir": "/tmp/fit", "nodes": nodes,
            "tasks_per_node": 8, "program": {"argv": ["true"]}}
    if parallelism is not None:
        data["parallelism"] = parallelism
    if network:
        data["network"] = {"instance_type": network}
    return JobSpec.model_validate(data)


def test_without_a_model_shape_nothing_is_checked() -> None:
    assert check_fit(spec(1, None)) is None
    assert check_fit(spec(1, {"tp": 8})) is None
    assert fit_warning(spec(1, {"tp": 8})) is None


def test_the_verdict_is_the_planners_for_the_same_layout() -> None:
    fit = check_fit(spec(2, {"pp": 2, "tp": 8, "model": {"preset": "llama-70b"}}))
    plan = plan_layouts(PRESETS["llama-70b"], 2, 8, 80.0, instance_type="p5.48xlarge")
    same = next(x for x in plan.layouts if (x.dp, x.pp, x.tp) == (1, 2, 8))
    assert fit is not None and fit.layout == "dp=1 pp=2 tp=8"
    assert (fit.total_gib, fit.total_ckpt_gib, fit.fits_ckpt) == (
        same.total_gib, same.total_ckpt_gib, same.fits_ckpt)
    assert fit.usable_gib == pytest.approx(72.0)  # 80 GiB less the 10% headroom


def test_70b_on_one_p5_node_is_refused_naming_the_numbers_and_what_fits() -> None:
    # FSDP over 8 GPUs: 70.55e9 x 16 bytes / 8 = 131 GiB of model states per GPU before any
    # activation, far above the 72 GiB a p5 GPU has with the 10% headroom.
    with pytest.raises(SpecError) as err:
        fit_warning(spec(1, {"model": {"preset": "llama-70b"}}))
    text = str(err.value)
    assert text.startswith("parallelism: dp=8 pp=1 tp=1 of llama-70b needs ")
    assert "a GPU of p5.48xlarge has 72.0 GiB usable" in text
    assert "no layout of these ranks fits" in text and "if_unfit: warn" in text
    fit = check_fit(spec(1, {"model": {"preset": "llama-70b"}}))
    assert fit is not None and fit.total_ckpt_gib > 131 and not fit.fits_ckpt


def test_warn_submits_and_says_so() -> None:
    line = fit_warning(spec(1, {"model": {"preset": "llama-70b", "if_unfit": "warn"}}))
    assert line is not None and line.startswith("parallelism: dp=8 pp=1 tp=1 of llama-70b")


def test_a_layout_that_fits_only_with_activation_checkpointing_is_a_note() -> None:
    fit = check_fit(spec(2, {"model": {"preset": "llama-8b"}}))
    assert fit is not None and fit.fits_ckpt
    line = fit_warning(spec(2, {"model": {"preset": "llama-8b"}}))
    if fit.fits:
        assert line is None
    else:
        assert line is not None and "only with activation checkpointing" in line


def test_a_small_model_fits_and_says_nothing() -> None:
    shape = {"params": 125_000_000, "layers": 12, "hidden": 768, "heads": 12, "seq_len": 1024}
    assert fit_warning(spec(1, {"model": shape})) is None
    assert check_fit(spec(1, {"model": shape})).fits


def test_the_instance_type_is_required_and_checked_naming_the_field() -> None:
    with pytest.raises(SpecError, match="set network.instance_type or "
                                        "parallelism.model.instance_type"):
        check_fit(spec(1, {"model": {"preset": "llama-8b"}}, network=None))
    with pytest.raises(SpecError, match="parallelism.model.instance_type: 'c5.large' has no GPUs"):
        check_fit(spec(1, {"model": {"preset": "llama-8b", "instance_type": "c5.large"}}))


@pytest.mark.parametrize(("model", "field"), [
    ({"preset": "gpt-5"}, "parallelism.model.preset"),
    ({"params": 10, "layers": 2}, "parallelism.model.hidden"),
    ({"preset": "llama-8b", "heads": 5}, "parallelism.model.heads"),
    ({"preset": "llama-8b", "sharding": "zero3"}, "parallelism.model.sharding"),
    ({"preset": "llama-8b", "headroom": 0.95}, "parallelism.model.headroom"),
])
def test_a_bad_model_block_names_the_field(model, field, spec_file, hpcflow, tmp_path) -> None:
    result = hpcflow("submit", str(spec_file(tmp_path / "run", parallelism={"model": model})),
                     "--dry-run")
    assert result.exit_code == 2 and field in result.output and "Traceback" not in result.output


def test_dry_run_refuses_and_writes_nothing(spec_file, hpcflow, tmp_path) -> None:
    run = tmp_path / "run"
    path = spec_file(run, nodes=1, tasks_per_node=8, network={"instance_type": "p5.48xlarge"},
                     parallelism={"model": {"preset": "llama-70b"}})
    result = hpcflow("submit", str(path), "--dry-run")
    assert result.exit_code == 2, result.output
    assert "dp=8 pp=1 tp=1 of llama-70b needs" in result.output and not run.exists()
    warned = spec_file(run, nodes=1, tasks_per_node=8, network={"instance_type": "p5.48xlarge"},
                       parallelism={"model": {"preset": "llama-70b", "if_unfit": "warn"}})
    result = hpcflow("submit", str(warned), "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert "hpcflow: warning: parallelism: dp=8 pp=1 tp=1 of llama-70b" in result.output
    data = json.loads(result.output[result.output.index("{"):])["data"]
    assert data["warnings"][0].startswith("parallelism: dp=8 pp=1 tp=1")


def test_the_spec_of_the_plan_page_is_refused_as_it_says(spec_file, hpcflow, tmp_path) -> None:
    from pathlib import Path

    import yaml

    page = (Path(__file__).resolve().parents[3] / "docs" / "plan.md").read_text()
    block = page.split("### The check at submit", 1)[1].split("```yaml\n", 1)[1].split("```")[0]
    fields = yaml.safe_load(block)
    path = spec_file(tmp_path / "run", **fields)
    result = hpcflow("submit", str(path), "--dry-run")
    assert result.exit_code == 2, result.output
    assert "parallelism: dp=8 pp=1 tp=1 of llama-70b needs" in result.output
    fit = check_fit(JobSpec.model_validate(yaml.safe_load(path.read_text())))
    states = 70_553_706_496 * 16 / 8 / 2**30  # the page's 131 GiB of model states per GPU
    assert round(states) == 131 and fit.total_ckpt_gib > states
