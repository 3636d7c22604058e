"""What ParallelCluster itself says about a config, offline: the real schema
(``ClusterSchema().load``) and those of its validators that need no AWS call, run on the loaded
config the way ``config.validate()`` registers them (aws-parallelcluster 3.16.1).

Tests put hpcflow's verdict next to this one: hpcflow's errors must cover ParallelCluster's, and
hpcflow may refuse more only with a finding that says why it is stricter.
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

from hpcflow.pcluster.schema import flatten_messages, load_config, pcluster_env

# Validators that decide from the config alone (no EC2, IAM, FSx or S3 call).
OFFLINE = frozenset({
    "CustomSlurmSettingsValidator", "CustomSlurmNodeNamesValidator", "EfaPlacementGroupValidator",
    "EfaMultiAzValidator", "FsxStorageCapacityValidator", "FsxStorageTypeOptionsValidator",
    "FsxPersistentOptionsValidator", "FsxBackupOptionsValidator", "NameValidator",
    "DuplicateNameValidator", "ComputeResourceSizeValidator", "MaxCountValidator",
    "NumberOfStorageValidator", "SharedStorageNameValidator", "DuplicateMountDirValidator",
    "OverlappingMountDirValidator", "SchedulerValidator", "EfaValidator",
    "InstancesCPUValidator", "InstancesAcceleratorsValidator", "InstancesEFAValidator",
    "InstancesNetworkingValidator", "InstancesAllocationStrategyValidator", "CapacityTypeValidator",
})


@functools.cache
def _recorded_instance_types() -> dict[str, Any]:
    """EC2 DescribeInstanceTypes answers as recorded in moto (the same data AWS returns)."""
    import moto

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _answer_offline() -> None:
    """Let pcluster's EC2 wrapper answer instance type facts and subnet zones without a call:
    instance facts from moto's recorded EC2 data (pcluster's own
    ``additional_instance_types_data`` hook), and a zone derived from each subnet id."""
    from pcluster.aws.aws_api import AWSApi
    from pcluster.aws.aws_resources import ImageInfo

    ec2 = AWSApi.instance().ec2
    ec2.additional_instance_types_data = _recorded_instance_types()
    ec2.get_official_image_id = lambda os, architecture, filters=None: "ami-0123456789abcdef0"
    ec2.describe_image = lambda ami_id: ImageInfo({
        "ImageId": ami_id, "Architecture": "x86_64", "RootDeviceName": "/dev/xvda",
        "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 40}}],
        "Name": "offline", "CreationDate": "2025-01-01T00:00:00.000Z", "Tags": []})
    ec2.get_subnet_avail_zone = _zone
    ec2.get_subnets_az_mapping = lambda subnet_ids: {s: _zone(s) for s in subnet_ids}


def _zone(subnet_id: str) -> str:
    """A zone per subnet id: different subnets stand for different zones, as hpcflow assumes."""
    return "us-east-1-az" + str(sum(subnet_id.encode()) % 1000)


def _walk(resource: Any, seen: set[int]) -> list[Any]:
    if id(resource) in seen:
        return []
    seen.add(id(resource))
    out = [resource]
    for child in resource._nested_resources():
        out += _walk(child, seen)
    return out


def pcluster_verdict(cfg: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(schema error messages, offline validator ERROR messages) for ``cfg``."""
    from marshmallow import ValidationError
    from pcluster.validators.common import FailureLevel, ValidatorContext

    region = str(cfg.get("Region") or "us-east-1")
    with pcluster_env(region, offline=True):
        try:
            config = load_config(cfg, "oracle")
        except ValidationError as exc:
            return [f"{path}: {msg}" for path, msg in flatten_messages(exc.messages)], []
        _answer_offline()
        errors: list[str] = []
        for res in _walk(config, set()):
            res._validators.clear()
            try:
                res._register_validators(ValidatorContext())
            except Exception:  # noqa: BLE001 - registering some validators asks AWS
                continue
            for cls, kwargs in res._validators:
                if cls.__name__ not in OFFLINE:
                    continue
                for failure in cls().execute(**kwargs):
                    if failure.level == FailureLevel.ERROR:
                        errors.append(f"{cls.__name__}: {failure.message}")
    return [], errors
