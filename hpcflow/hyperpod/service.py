"""``hpcflow cluster hyperpod``: a cluster spec to a checked HyperPod ``CreateCluster`` request and
lifecycle bundle; with AWS, the bundle to S3 and the request to SageMaker, and the cluster read
back. The clients are passed in; :func:`make_clients` imports boto3.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcflow.errors import Ec2Error, SpecError
from hpcflow.hyperpod.bundle import bundle_files, upload_bundle, write_bundle
from hpcflow.hyperpod.request import HyperPodPlan, build_request
from hpcflow.hyperpod.rules import check_plan
from hpcflow.pcluster.catalog import Catalog
from hpcflow.pcluster.findings import Finding
from hpcflow.spec.cluster import ClusterSpec


@dataclass(frozen=True)
class Checked:
    """A spec's HyperPod request and bundle, with every finding (no error among them)."""

    spec: ClusterSpec
    plan: HyperPodPlan
    findings: list[Finding]
    files: dict[str, bytes]

    @property
    def request(self) -> dict[str, Any]:
        """The ``CreateCluster`` keyword arguments."""
        return self.plan.request

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the request, the bundle's file names, the findings."""
        return {"request": self.request, "lifecycle_s3_uri": self.plan.hyperpod.lifecycle_s3_uri,
                "bundle": list(self.files), "findings": [f.to_dict() for f in self.findings]}


def check_spec(spec: ClusterSpec, source: str, catalog: Catalog,
               bootstrap_root: Path) -> Checked:
    """Render and check the HyperPod request and bundle of a loaded spec.

    Raises:
        SpecError: the spec has no ``hyperpod:`` block, or a rule (or botocore's parameter
            validation) found an error; one line per problem naming the spec field. Its ``data``
            keeps every finding for ``--json``.
    """
    if spec.hyperpod is None:
        raise SpecError(f"{source}: hyperpod: the spec has no hyperpod block; add one with at "
                        "least execution_role, lifecycle_s3_uri and security_group_ids (see "
                        "docs/hyperpod.md)")
    plan = build_request(spec, catalog)
    findings = check_plan(spec, plan, catalog)
    errors = [f for f in findings if f.level == "error"]
    if errors:
        lines = [f"{source}: {f.path}: {f.message}" for f in errors]
        err = SpecError(f"{source}: {len(lines)} problem(s) for HyperPod\n  "
                        + "\n  ".join(lines), lines)
        err.data = {"findings": [f.to_dict() for f in findings]}
        raise err
    return Checked(spec, plan, findings, bundle_files(plan, bootstrap_root))


def check_file(spec_path: str | Path, overrides: Sequence[str] = (),
               catalog: Catalog | None = None) -> Checked:
    """Load ``spec_path`` (with ``--set`` overrides) and :func:`check_spec` it.

    Raises:
        SpecError: as :func:`check_spec`, or the spec file is unreadable or malformed.
    """
    from hpcflow.pcluster.facts import catalog_with_cache
    from hpcflow.resources import data_dir
    from hpcflow.spec.cluster_loading import load_cluster_spec

    spec = load_cluster_spec(spec_path, list(overrides))
    return check_spec(spec, str(spec_path), catalog or catalog_with_cache(spec.region),
                      data_dir("bootstrap"))


def write_files(checked: Checked, folder: str | Path) -> list[Path]:
    """Write the bundle to a local folder (to inspect it, or to upload it yourself).

    Raises:
        SpecError: the folder cannot be written (named, with the reason).
    """
    try:
        return write_bundle(checked.files, Path(folder))
    except OSError as exc:
        raise SpecError(f"--bundle-dir {folder}: cannot write the bundle: {exc.strerror or exc}"
                        ) from None


def create(checked: Checked, s3: Any, sagemaker: Any) -> dict[str, Any]:
    """Upload the bundle to ``hyperpod.lifecycle_s3_uri``, then call ``CreateCluster``.

    Returns:
        ``{"cluster_arn": ..., "uploaded": [s3 urls]}``.

    Raises:
        SpecError: the bucket does not exist, or SageMaker refused the request as invalid
            (``ValidationException``) or the name is taken (``ResourceInUse``).
        Ec2Error: AWS could not be asked (credentials, network, access denied, quota).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    urls = upload_bundle(s3, checked.files, checked.plan.hyperpod.lifecycle_s3_uri)
    try:
        answer = sagemaker.create_cluster(**checked.request)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        message = exc.response.get("Error", {}).get("Message", str(exc))
        if code in ("ValidationException", "ResourceInUse"):
            raise SpecError(f"SageMaker CreateCluster refused {checked.spec.name!r}: {code}: "
                            f"{message}") from None
        raise Ec2Error(f"SageMaker CreateCluster failed: {code}: {message}") from None
    except BotoCoreError as exc:
        raise Ec2Error(f"SageMaker could not be reached: {exc}") from None
    return {"cluster_arn": answer.get("ClusterArn"), "uploaded": urls}


def describe(sagemaker: Any, name: str) -> dict[str, Any]:
    """SageMaker's ``DescribeCluster`` answer for ``name``, without the HTTP metadata.

    Raises:
        SpecError: no cluster of that name (``ResourceNotFound``).
        Ec2Error: AWS could not be asked.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        answer = dict(sagemaker.describe_cluster(ClusterName=name))
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        message = exc.response.get("Error", {}).get("Message", str(exc))
        if code in ("ResourceNotFound", "ValidationException"):
            raise SpecError(f"cluster {name!r}: {code}: {message}") from None
        raise Ec2Error(f"SageMaker DescribeCluster failed: {code}: {message}") from None
    except BotoCoreError as exc:
        raise Ec2Error(f"SageMaker could not be reached: {exc}") from None
    answer.pop("ResponseMetadata", None)
    return answer


def make_clients(region: str, endpoint_url: str | None = None) -> tuple[Any, Any]:
    """boto3 S3 and SageMaker clients for ``region`` (imports boto3)."""
    import boto3
    from botocore.config import Config

    cfg = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5,
                 read_timeout=30)
    return (boto3.client("s3", region_name=region, endpoint_url=endpoint_url, config=cfg),
            boto3.client("sagemaker", region_name=region, endpoint_url=endpoint_url, config=cfg))
