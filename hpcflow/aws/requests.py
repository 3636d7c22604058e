"""AWS request shapes checked offline against botocore's own service models.

botocore ships the JSON service model of every AWS API (installed with boto3); its
``ParamValidator`` is what every boto3 call runs on its parameters before anything is sent. Running
it here, with no client and no credentials, checks a request hpcflow renders (a SageMaker
``CreateCluster`` or ``CreateTrainingJob``) field for field against the exact shape AWS takes, as
ParallelCluster's own schema checks a cluster config (botocore ``botocore/validate.py``; seen with
botocore 1.44).

SageMaker names instance types with an ``ml.`` prefix on the EC2 name (``ml.p5.48xlarge`` is the
SageMaker form of ``p5.48xlarge``; the ``ClusterInstanceType`` and ``TrainingInstanceType`` enums of
botocore's ``sagemaker`` model list the accepted values).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

ML_PREFIX = "ml."


@lru_cache(maxsize=8)
def _service_model(service: str) -> Any:
    """botocore's service model for ``service`` (loaded once per process; a few tens of ms)."""
    from botocore.session import get_session

    return get_session().get_service_model(service)


def request_problems(service: str, operation: str, params: Mapping[str, Any]) -> list[str]:
    """What botocore's parameter validation says of a request, one line per problem.

    Args:
        service: the botocore service name (``"sagemaker"``, ``"ec2"``).
        operation: the API operation (``"CreateCluster"``, ``"CreateTrainingJob"``).
        params: the request as boto3 would take it (keyword arguments of the client method).

    Returns:
        An empty list when the request has the shape AWS takes; else botocore's own messages
        (missing required members, unknown members, wrong types, values outside a length or
        range bound), in botocore's order. Pattern and enum constraints are checked by the
        service, not by botocore: callers check the enums they care about with ``enum_values``.

    Raises:
        botocore.exceptions.UnknownServiceError, OperationNotFoundError: a name botocore does
            not know (a bug in the caller, not bad input).
    """
    from botocore.validate import ParamValidator

    shape = _service_model(service).operation_model(operation).input_shape
    report = ParamValidator().validate(dict(params), shape)
    if not report.has_errors():
        return []
    return [line.strip() for line in report.generate_report().splitlines() if line.strip()]


def enum_values(service: str, shape_name: str) -> tuple[str, ...]:
    """The values botocore's model lists for an enum shape (``("sagemaker",
    "ClusterInstanceType")``, ``("ec2", "InstanceType")``), in the model's order.

    Raises:
        botocore.model.NoShapeFoundError: the model has no such shape.
    """
    return tuple(_service_model(service).shape_for(shape_name).enum)


def to_ml_instance_type(instance_type: str) -> str:
    """The SageMaker name of an EC2 instance type: ``p5.48xlarge`` -> ``ml.p5.48xlarge``; a name
    that already has the prefix is returned as it is."""
    return instance_type if instance_type.startswith(ML_PREFIX) else ML_PREFIX + instance_type


def to_ec2_instance_type(instance_type: str) -> str:
    """The EC2 name of a SageMaker instance type: ``ml.p5.48xlarge`` -> ``p5.48xlarge``; a name
    without the prefix is returned as it is."""
    return instance_type[len(ML_PREFIX):] if instance_type.startswith(ML_PREFIX) else instance_type


def constraint_problems(service: str, operation: str, params: Mapping[str, Any]) -> list[str]:
    """What the service would refuse that botocore's own validation lets through: a value above
    a ``max`` bound (a number, or a string's or list's length), a string outside its ``pattern``
    or its enum, read from the same service model.

    botocore checks only the ``min`` bounds (``botocore/validate.py``: "the max constraints are
    not validated", since a service may raise them); the model's bounds are those of the API
    reference pages. A pattern Python's ``re`` cannot compile (``\\p{L}`` classes) is skipped.

    Returns:
        One line per problem, with the member path (``InstanceGroups[2].InstanceCount``).

    Raises:
        As :func:`request_problems`, for a name botocore does not know.
    """
    shape = _service_model(service).operation_model(operation).input_shape
    out: list[str] = []
    _walk(shape, params, "", out)
    return out


def _walk(shape: Any, value: Any, path: str, out: list[str]) -> None:
    import re

    meta = shape.metadata
    kind = shape.type_name
    if kind == "structure" and isinstance(value, Mapping):
        for name, member in shape.members.items():
            if name in value:
                _walk(member, value[name], f"{path}.{name}" if path else name, out)
    elif kind == "list" and isinstance(value, list):
        if "max" in meta and len(value) > meta["max"]:
            out.append(f"{path}: {len(value)} items, at most {meta['max']} allowed")
        for i, item in enumerate(value):
            _walk(shape.member, item, f"{path}[{i}]", out)
    elif kind == "string" and isinstance(value, str):
        if "max" in meta and len(value) > meta["max"]:
            out.append(f"{path}: {len(value)} characters, at most {meta['max']} allowed")
        if shape.enum and value not in shape.enum:
            out.append(f"{path}: {value!r} is not one of {len(shape.enum)} allowed values")
        elif "pattern" in meta:
            try:
                ok = re.fullmatch(meta["pattern"].removeprefix("^").removesuffix("$"), value)
            except re.error:
                ok = True
            if not ok:
                out.append(f"{path}: {value!r} does not match {meta['pattern']}")
    elif kind in ("integer", "long") and isinstance(value, int) and not isinstance(value, bool):
        if "max" in meta and value > meta["max"]:
            out.append(f"{path}: {value} is above the largest allowed, {meta['max']}")
