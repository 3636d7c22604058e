"""`hpcflow local-cluster rehearse --by`: a bad value is refused before anything is submitted."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hpcflow.cli.main import cli
from hpcflow.errors import HpcflowError
from hpcflow.local_cluster.rehearse import rehearse


class NoSlurm:
    def __getattr__(self, name):  # noqa: ANN001, ANN204
        raise AssertionError(f"Slurm was asked ({name}) for a rehearsal that must not start")


def test_an_unknown_way_to_preempt_names_the_value_and_the_choices(tmp_path):
    with pytest.raises(HpcflowError, match=r"by is 'sigterm'; allowed: signal, slurm"):
        rehearse(tmp_path / "job.yaml", by="sigterm", client=NoSlurm())


def test_the_cli_refuses_it_too(tmp_path):
    result = CliRunner().invoke(cli, ["local-cluster", "rehearse", str(tmp_path / "j.yaml"),
                                      "--by", "sigterm"])
    assert result.exit_code == 2 and "'sigterm' is not one of 'signal', 'slurm'" in result.output
