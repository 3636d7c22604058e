"""The example HyperPod spec as a plain dict, to change one field per test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hpcflow.resources import data_dir

EXAMPLE = data_dir("pcluster_configs") / "hyperpod-p5.spec.yaml"


def example_data() -> dict[str, Any]:
    """The example HyperPod spec, read fresh."""
    return yaml.safe_load(Path(EXAMPLE).read_text())
