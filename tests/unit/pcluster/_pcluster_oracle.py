"""What ParallelCluster itself says about a config, offline: the real schema
(``ClusterSchema().load``) and those of its validators that need no AWS call, run on the loaded
config the way ``config.validate()`` registers them (aws-parallelcluster 3.16.1).

Tests put hpcflow's verdict next to this one: hpcflow's errors must cover ParallelCluster's, and
hpcflow may refuse more only with a finding that says why it is stricter.

The oracle checks itself: a resource whose validators fail to register, or a schema-valid config
on which fewer than :data:`MIN_OFFLINE_VALIDATORS` of the offline validators ran, fails the test
(an oracle that silently skips validators would agree with anything). :data:`LAST_RUN` keeps what
ran.
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
    "PlacementGroupNamingValidator", "SharedStorageMountDirValidator",
})
#: The distinct offline validators that run on the smallest config here (one queue, one compute
#: resource, no storage: 11 with aws-parallelcluster 3.16.1); a schema-valid config that runs
#: fewer means registrations went missing.
MIN_OFFLINE_VALIDATORS = 11
#: What the last :func:`pcluster_verdict` ran: validator name -> number of runs.
LAST_RUN: dict[str, int] = {}


@functools.cache
def _recorded_instance_types() -> dict[str, Any]:
    """EC2 DescribeInstanceTypes answers as recorded in moto (the same data AWS returns)."""
    import moto

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _reservations(cfg: dict[str, Any]) -> dict[str, str]:
    """Capacity reservation id -> the instance type of the compute resource that targets it."""
    out: dict[str, str] = {}
    for q in (cfg.get("Scheduling") or {}).get("SlurmQueues") or []:
        for c in q.get("ComputeResources") or []:
            target = c.get("CapacityReservationTarget") or q.get("CapacityReservationTarget") or {}
            if target.get("CapacityReservationId") and c.get("InstanceType"):
                out[target["CapacityReservationId"]] = c["InstanceType"]
    return out


def _answer_offline(reservations: dict[str, str]) -> None:
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
    # A reservation's instance type, as EC2 would say it: the type of the compute resource that
    # names it (with ``reservations``, from the config); its kind is left unknown.
    ec2.get_instance_type_and_reservation_type_from_capacity_reservation = \
        lambda cr_id: (reservations.get(cr_id, "unknown.type"), None)
    real_info = ec2.get_instance_type_info

    def instance_type_info(instance_type):  # noqa: ANN001, ANN202 - pcluster's signature
        if instance_type not in ec2.additional_instance_types_data:
            raise UnknownInstanceType(instance_type)
        return real_info(instance_type)

    ec2.get_instance_type_info = instance_type_info
    # A named placement group is taken to exist (PlacementGroupNamingValidator asks EC2 only
    # after its offline checks).
    ec2.describe_placement_group = lambda group_name: {"GroupName": group_name,
                                                       "State": "available"}
    ec2.get_subnets_az_mapping = lambda subnet_ids: {s: _zone(s) for s in subnet_ids}


class UnknownInstanceType(Exception):
    """EC2 knows no such type: ``pcluster create-cluster`` fails on it (DescribeInstanceTypes
    answers InvalidInstanceType), so the oracle counts it as ParallelCluster's rejection."""


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
        _answer_offline(_reservations(cfg))
        errors: list[str] = []
        ran: dict[str, int] = {}
        for res in _walk(config, set()):
            res._validators.clear()
            try:
                res._register_validators(ValidatorContext())
            except UnknownInstanceType as exc:
                errors.append(f"DescribeInstanceTypes: EC2 knows no instance type {exc}")
                continue
            except Exception as exc:  # noqa: BLE001 - any failure: the verdict would be partial
                raise AssertionError(f"the oracle could not register the validators of "
                                     f"{type(res).__name__}: {type(exc).__name__}: {exc}") from exc
            for cls, kwargs in res._validators:
                if cls.__name__ not in OFFLINE:
                    continue
                ran[cls.__name__] = ran.get(cls.__name__, 0) + 1
                for failure in cls().execute(**kwargs):
                    if failure.level == FailureLevel.ERROR:
                        errors.append(f"{cls.__name__}: {failure.message}")
    LAST_RUN.clear()
    LAST_RUN.update(ran)
    if len(ran) < MIN_OFFLINE_VALIDATORS and not errors:
        raise AssertionError(f"only {len(ran)} offline validators ran ({sorted(ran)}); at least "
                             f"{MIN_OFFLINE_VALIDATORS} register on every schema-valid config")
    return [], errors
