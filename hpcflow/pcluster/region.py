"""The region of a ParallelCluster config that may not say one, found where ParallelCluster looks.

A config's ``Region:`` is optional: most public configs leave it out, and ``pcluster`` takes the
region from ``--region`` (which it puts in ``AWS_DEFAULT_REGION``), else from the environment or
the AWS config file, through boto3's session (aws-parallelcluster 3.16.1 ``cli/entrypoint.py``
and ``aws/common.py::get_region``). The order here: the config's ``Region``, ``--region``,
``AWS_DEFAULT_REGION``, ``AWS_REGION``, then the ``region`` of the profile (``AWS_PROFILE``, else
``default``) in the AWS config file (``AWS_CONFIG_FILE``, else ``~/.aws/config``; AWS CLI user
guide, "Configuration and credential file settings"). Pure apart from reading that one file; no
boto3.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow.errors import SpecError
from hpcflow.spec.cluster_types import region_problem
from hpcflow.spec.messages import short_value, source_name

#: The largest AWS config file read, in bytes (a real one is a few KiB).
MAX_AWS_CONFIG_BYTES = 1024 * 1024


@dataclass(frozen=True)
class FoundRegion:
    """A region and where it came from.

    Attributes:
        region: e.g. ``us-west-2``.
        source: e.g. ``the config's Region``, ``--region``, ``AWS_DEFAULT_REGION``, or
            ``~/.aws/config (profile default)``.
    """

    region: str
    source: str


def aws_config_region(environ: Mapping[str, str]) -> FoundRegion | None:
    """The ``region`` of the active profile in the AWS config file, or None when the file, the
    profile or the key is missing or the file cannot be read as INI."""
    path = Path(environ.get("AWS_CONFIG_FILE") or Path(environ.get("HOME", "~")) / ".aws" / "config")
    path = path.expanduser()
    profile = environ.get("AWS_PROFILE") or environ.get("AWS_DEFAULT_PROFILE") or "default"
    try:
        if not path.is_file() or path.stat().st_size > MAX_AWS_CONFIG_BYTES:
            return None
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, configparser.Error):
        return None
    section = "default" if profile == "default" else f"profile {profile}"
    value = parser.get(section, "region", fallback="").strip()
    if not value:
        return None
    return FoundRegion(value, f"{source_name(path)} (profile {profile})")


def find_region(cfg: Mapping[str, Any], cli_region: str | None,
                environ: Mapping[str, str] | None = None) -> FoundRegion:
    """The region of ``cfg``, in the order of the module docstring.

    Args:
        cfg: the ParallelCluster config dict.
        cli_region: ``--region``, or None.
        environ: the environment (``os.environ`` when None).

    Raises:
        SpecError: no source names a region, or the one found is not a region aws-parallelcluster
            supports; the message names the source and the fix.
    """
    env = os.environ if environ is None else environ
    candidates: list[tuple[Any, str]] = [(cfg.get("Region"), "the config's Region"),
                                         (cli_region, "--region"),
                                         (env.get("AWS_DEFAULT_REGION"), "AWS_DEFAULT_REGION"),
                                         (env.get("AWS_REGION"), "AWS_REGION")]
    found = next((FoundRegion(str(v) if isinstance(v, str) else v, where)
                  for v, where in candidates if v not in (None, "")), None)
    found = found or aws_config_region(env)
    if found is None:
        raise SpecError("cannot import: the config has no Region, and neither --region, "
                        "AWS_DEFAULT_REGION, AWS_REGION nor the AWS config file names one; pass "
                        "--region REGION, e.g. --region us-east-1")
    if not isinstance(found.region, str) or (problem := region_problem(found.region)):
        why = "not text" if not isinstance(found.region, str) else problem
        raise SpecError(f"cannot import: region {short_value(found.region)} from {found.source}: "
                        f"{why}")
    return found
