"""The last gate: the installed aws-parallelcluster package's own schema, and (``--deep``) its
validators against an AWS endpoint.

Offline check: ``pcluster.schemas.cluster_schema.ClusterSchema(cluster_name=...).load(config)``
raises a marshmallow ``ValidationError`` with per-field messages (seen with aws-parallelcluster
3.16.1). It needs a region and credentials in the environment; while building the config object
it also tries ``DescribeCapacityReservations`` when reservation ids are present (3.16.1
``cluster_config.py``, ``SlurmClusterConfig.__init__``), and tolerates its failure. The offline
check therefore runs with dummy credentials and every AWS endpoint pointed at a closed loopback
port, so nothing leaves the machine.

Deep check: ``config.validate()`` runs ParallelCluster's validators, which call EC2, IAM, FSx...
against the real account, or ``endpoint_url`` (e.g. a moto server).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from hpcflow.errors import Ec2Error, HpcflowError
from hpcflow.pcluster.findings import Ctx as _Ctx
from hpcflow.pcluster.findings import FieldPath, Finding

# Port 9 (discard) on loopback: connections are refused at once, so boto3 fails fast offline.
_BLOCKED_ENDPOINT = "http://127.0.0.1:9"
_ENV_KEYS = ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
             "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_MAX_ATTEMPTS",
             "AWS_RETRY_MODE", "AWS_EC2_METADATA_DISABLED")


def require_pcluster() -> None:
    """Check that the aws-parallelcluster package (the ``aws`` extra) can be imported.

    Raises:
        HpcflowError: it is missing; the message says how to install it.
    """
    import importlib.util

    for module in ("pcluster", "boto3", "marshmallow"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise HpcflowError(
                f"the ParallelCluster schema check needs the {module!r} module, which is not "
                "installed: pip install 'hpcflow[aws]' (brings boto3 and aws-parallelcluster; "
                "use the version of the pcluster CLI you will create the cluster with)")


@contextlib.contextmanager
def pcluster_env(region: str, *, offline: bool, endpoint_url: str | None = None) -> Iterator[None]:
    """Set the process environment pcluster reads, and restore it afterwards.

    Args:
        region: the config's region.
        offline: use dummy credentials and a refused loopback endpoint (no call leaves).
        endpoint_url: for the deep check, another AWS endpoint (a moto server in tests).
    """
    saved = {k: os.environ.get(k) for k in _ENV_KEYS}
    os.environ["AWS_DEFAULT_REGION"] = region
    os.environ["AWS_REGION"] = region
    if offline:
        for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
            os.environ.pop(k, None)
        os.environ.update(AWS_ACCESS_KEY_ID="hpcflow-offline", AWS_SECRET_ACCESS_KEY="offline",
                          AWS_ENDPOINT_URL=_BLOCKED_ENDPOINT, AWS_MAX_ATTEMPTS="1",
                          AWS_RETRY_MODE="standard", AWS_EC2_METADATA_DISABLED="true")
    elif endpoint_url:
        os.environ["AWS_ENDPOINT_URL"] = endpoint_url
    _reset_pcluster_clients()
    previous_disable = logging.root.manager.disable
    logging.disable(logging.CRITICAL)  # pcluster logs its own failed calls; we report them
    restore_region = _fast_region(region)
    try:
        yield
    finally:
        restore_region()
        logging.disable(previous_disable)
        _reset_pcluster_clients()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _fast_region(region: str):  # noqa: ANN202
    """Answer pcluster's ``get_region()`` from ``region`` while loading.

    aws-parallelcluster 3.16.1 ``cluster_config.py`` calls ``pcluster.aws.common.get_region()``
    once per queue, and each call builds a ``boto3.session.Session()`` only to read the region
    this context has just put in ``AWS_DEFAULT_REGION`` (about 33 ms each: 1.7 s for 50 queues).
    Returns a function that restores the original.
    """
    import pcluster.config.cluster_config as cc

    original = getattr(cc, "get_region", None)
    if original is None:
        return lambda: None
    cc.get_region = lambda: region

    def restore() -> None:
        cc.get_region = original

    return restore


def _reset_pcluster_clients() -> None:
    """Forget pcluster's process-wide boto3 clients and caches (``AWSApi.instance()``)."""
    from pcluster.aws.aws_api import AWSApi
    from pcluster.aws.common import Cache

    AWSApi._instance = None
    Cache.clear_all()


def flatten_messages(messages: Any, prefix: FieldPath = ()) -> list[tuple[FieldPath, str]]:
    """Turn marshmallow's nested ``{"Scheduling": {"SlurmQueues": {0: {...: [msg]}}}}`` into
    ``[(("Scheduling", "SlurmQueues", 0, ...), msg)]``; ``_schema`` keys attach to their parent."""
    out: list[tuple[FieldPath, str]] = []
    if isinstance(messages, Mapping):
        for key, sub in messages.items():
            path = prefix if key == "_schema" else prefix + (key,)
            out.extend(flatten_messages(sub, path))
    elif isinstance(messages, (list, tuple)):
        for sub in messages:
            out.extend(flatten_messages(sub, prefix))
    else:
        out.append((prefix, str(messages)))
    return out


def _value_at(cfg: Any, path: FieldPath) -> Any:
    node = cfg
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node


# marshmallow's messages for a value of the wrong shape (3.x ``fields.Nested``, ``fields.List``),
# which say neither what was given nor what is expected.
_SHAPE_MESSAGES = {"Invalid input type.": "a mapping of keys", "Invalid type.": "a list"}


def schema_message(path: FieldPath, value: Any, msg: str) -> str:
    """One schema message with the value (bounded, escaped) and, for a value of the wrong
    shape, what shape is expected: ``[1] (a list): rejected by the ParallelCluster schema:
    Invalid input type. (expected a mapping of keys)``."""
    from hpcflow.spec.messages import short_value

    expected = _SHAPE_MESSAGES.get(msg)
    tail = f" (expected {expected})" if expected else ""
    if msg == "Unknown field." and path and not isinstance(path[-1], str):
        key = "a null key (YAML's `~`, `null`, or a line that starts with ':')" \
            if path[-1] is None else f"the key {short_value(path[-1])}"
        return f"{key} is not a field name: keys are ParallelCluster field names (text)"
    if value is None and msg != "Field may not be null.":
        return f"rejected by the ParallelCluster schema: {msg}{tail}"
    return (f"{short_value(value)} ({_kind(value)}): rejected by the ParallelCluster schema: "
            f"{msg}{tail}")


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "text", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def load_config(cfg: Mapping[str, Any], cluster_name: str = "hpcflow") -> Any:
    """Load ``cfg`` with the real ClusterSchema; must run inside :func:`pcluster_env`.

    Raises:
        marshmallow.ValidationError: the schema rejects the config.
    """
    import warnings

    with warnings.catch_warnings():
        # pcluster 3.16.1 still uses marshmallow's deprecated ``default=``: not ours to fix.
        warnings.simplefilter("ignore", DeprecationWarning)
        from pcluster.schemas.cluster_schema import ClusterSchema

        return ClusterSchema(cluster_name=cluster_name).load(dict(cfg))


def schema_check(cfg: Mapping[str, Any], cluster_name: str = "hpcflow",
                 sources: Mapping[FieldPath, str] | None = None,
                 region: str | None = None) -> list[Finding]:
    """Run the real ParallelCluster schema offline; one error finding per schema message.

    Args:
        region: the region to load the config in when it has no ``Region`` (as
            ``pcluster --region`` would give it; a spec's ``region``); us-east-1 when None.

    Costs about 0.5 s for the first import of pcluster, then tens of milliseconds.
    """
    require_pcluster()
    from marshmallow import ValidationError

    ctx = _Ctx(sources)
    region = str(cfg.get("Region") or region or "us-east-1")
    with pcluster_env(region, offline=True):
        try:
            load_config(cfg, cluster_name)
        except ValidationError as exc:
            for path, msg in flatten_messages(exc.messages):
                where = ctx.where(path)
                cfg_path = _fmt(path)
                note = f" (ParallelCluster key {cfg_path})" if where != cfg_path else ""
                value = _value_at(cfg, path)
                ctx.add("SCHEMA", "error", path, value, schema_message(path, value, msg) + note)
        except Exception as exc:  # noqa: BLE001 - pcluster raises many types while loading
            ctx.add("SCHEMA", "error", (), None,
                    f"the ParallelCluster schema could not load the config: "
                    f"{type(exc).__name__}: {exc}")
    return ctx.findings


def deep_check(cfg: Mapping[str, Any], cluster_name: str = "hpcflow",
               endpoint_url: str | None = None,
               sources: Mapping[FieldPath, str] | None = None) -> list[Finding]:
    """Run ParallelCluster's own validators (``config.validate()``), which call AWS.

    Uses the caller's credentials (environment, profile or instance role) and, when given,
    ``endpoint_url`` for every service. Each validator failure becomes a finding whose code is
    the validator's class name; its level is ParallelCluster's (ERROR/WARNING/INFO). Costs one
    or more AWS calls per validator: seconds against AWS, about a second against moto.

    Raises:
        Ec2Error: AWS could not be asked at all (no credentials, no network, access denied):
            that says nothing about the config, so it is not reported as a finding.
    """
    require_pcluster()
    from marshmallow import ValidationError

    ctx = _Ctx(sources)
    region = str(cfg.get("Region") or "us-east-1")
    aws_failure: str | None = None
    with pcluster_env(region, offline=False, endpoint_url=endpoint_url), _quiet_coroutines():
        try:
            config = load_config(cfg, cluster_name)
            failures = config.validate()
        except ValidationError as exc:
            for path, msg in flatten_messages(exc.messages):
                value = _value_at(cfg, path)
                ctx.add("SCHEMA", "error", path, value, schema_message(path, value, msg))
            return ctx.findings
        except Exception as exc:  # noqa: BLE001 - AWS errors surface as several pcluster types
            if not _is_aws_failure(exc):
                ctx.add("DEEP_VALIDATION_FAILED", "error", (), None,
                        f"ParallelCluster's validators stopped: {type(exc).__name__}: {exc}")
                return ctx.findings
            aws_failure = str(exc)
    if aws_failure is not None:  # raised here, so no frame of pcluster's stays referenced
        where = endpoint_url or f"AWS in {region}"
        raise Ec2Error(
            f"--deep: ParallelCluster's validators could not ask {where}: {aws_failure}. Check "
            "your AWS credentials (AWS_PROFILE or the AWS_* variables) and network; without "
            "--deep, validate checks the config offline")
    for failure in failures:
        level = str(getattr(failure.level, "name", failure.level)).lower()
        level = level if level in ("error", "warning", "info") else "error"
        name = str(getattr(failure, "validator_type", "") or "validator")
        # ParallelCluster's failures carry no field path; the validator's name says what it checked.
        ctx.findings.append(Finding(name, level, f"ParallelCluster {name}", None,
                                    str(failure.message)))
    return ctx.findings


@contextlib.contextmanager
def _quiet_coroutines() -> Iterator[None]:
    """Drop the "coroutine 'AsyncValidator.execute_async' was never awaited" warnings of a
    ``config.validate()`` that stopped on a failed AWS call: pcluster 3.16.1 creates its async
    validators' coroutines before awaiting them, and an abandoned one warns when collected (at
    exit, after hpcflow's own message). They are collected here, under the filter."""
    import gc
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"coroutine .* was never awaited",
                                category=RuntimeWarning)
        try:
            yield
        finally:
            gc.collect()


def _is_aws_failure(exc: BaseException) -> bool:
    """True for an AWS call that failed (no credentials, no network, access denied) rather than
    a config problem: pcluster wraps boto3 errors in ``AWSClientError`` (3.16.1
    ``pcluster/aws/common.py``); some paths let botocore's own errors through."""
    from botocore.exceptions import BotoCoreError, ClientError
    from pcluster.aws.common import AWSClientError

    return isinstance(exc, (AWSClientError, BotoCoreError, ClientError))


def _fmt(path: FieldPath) -> str:
    from hpcflow.spec.loading import format_loc

    return format_loc(path)
