"""Checked string types shared by the cluster spec models: ids, names, URLs and paths, each
refused with a message that says what is expected.

Patterns as in aws-parallelcluster 3.16.1 ``pcluster/schemas/cluster_schema.py`` and
``pcluster/constants.py``, and the EC2/S3 id formats.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator

from hpcflow.spec.s3uri import BUCKET_PATTERN, bucket_name_problem


def _matching(pattern: str, what: str, example: str) -> AfterValidator:
    """A validator that refuses a string not matching ``pattern`` with a message saying what is
    expected (pydantic's own says only "String should match pattern '^...$'")."""
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        # fullmatch: with re.match, a ``$`` also matches before a trailing newline.
        if compiled.fullmatch(value):
            return value
        hint = ""
        if value != value.lower() and compiled.fullmatch(value.lower()):
            hint = f"; did you mean {value.lower()!r}?"
        elif value != value.strip() and compiled.fullmatch(value.strip()):
            hint = f"; did you mean {value.strip()!r}?"
        raise ValueError(f"not {what}: expected e.g. {example!r}{hint}")

    return AfterValidator(check)


def matching(pattern: str, what: str, example: str) -> AfterValidator:
    """A validator that refuses a string outside ``pattern`` (full match), saying what is
    expected and giving ``example`` (and a lowercase or stripped hint when that would match)."""
    return _matching(pattern, what, example)


SubnetId = Annotated[str, _matching(r"subnet-[0-9a-z]+", "a subnet id",
                                    "subnet-0a1b2c3d4e5f60718")]
SecurityGroupId = Annotated[str, _matching(r"sg-[0-9a-z]+", "a security group id",
                                           "sg-0123456789abcdef0")]
InstanceType = Annotated[str, _matching(r"[a-z][a-z0-9-]*\.[a-z0-9-]+",
                                        "an EC2 instance type (lowercase family.size)",
                                        "p5.48xlarge")]
ScriptUrl = Annotated[str, _matching(r"(s3|https)://\S+", "an s3:// or https:// script URL",
                                     "s3://my-bucket/bootstrap/10-efa.sh")]
def _bucket_rules(of_path: bool) -> AfterValidator:
    """The rest of S3's bucket naming rule (``..``, IP addresses, reserved prefixes and
    suffixes: :func:`hpcflow.spec.s3uri.bucket_name_problem`), after the pattern."""

    def check(value: str) -> str:
        bucket = value[len("s3://"):].partition("/")[0] if of_path else value
        if (problem := bucket_name_problem(bucket)) is not None:
            raise ValueError(f"bucket {bucket!r} is not a valid S3 bucket name: {problem} "
                             "(S3 bucket naming rules)")
        return value

    return AfterValidator(check)


S3Path = Annotated[str, _matching(rf"s3://{BUCKET_PATTERN}(/\S*)?",
                                  "an S3 path (s3://bucket/prefix, lowercase bucket name)",
                                  "s3://my-bucket/datasets"), _bucket_rules(of_path=True)]
BucketName = Annotated[str, _matching(BUCKET_PATTERN,
                                      "an S3 bucket name (3-63 lowercase letters, digits, dots, "
                                      "hyphens; no s3:// prefix)", "my-checkpoints"),
                       _bucket_rules(of_path=False)]
MountDir = Annotated[str, _matching(r"/[A-Za-z0-9_./-]*", "an absolute path", "/fsx")]
ReservationId = Annotated[str, _matching(r"cr-[0-9a-f]+", "a capacity reservation id",
                                         "cr-0123456789abcdef0")]
ResourceGroupArn = Annotated[str, _matching(
    r"arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[A-Za-z0-9_.-]+",
    "a resource group ARN", "arn:aws:resource-groups:us-east-1:123456789012:group/my-odcrs")]
PolicyArn = Annotated[str, _matching(r"arn:aws[a-z-]*:iam::(\d{12}|aws):policy/\S+",
                                     "an IAM policy ARN",
                                     "arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess")]
FileSystemId = Annotated[str, _matching(r"fs-[0-9a-z]{8}|fs-[0-9a-z]{17}",
                                        "a file system id (fs- and 8 or 17 characters)",
                                        "fs-0123456789abcdef0")]
FsxVolumeId = Annotated[str, _matching(r"fsvol-[0-9a-f]{17}", "an FSx volume id",
                                       "fsvol-0123456789abcdef0")]
EbsVolumeId = Annotated[str, _matching(r"vol-[0-9a-z]{8}|vol-[0-9a-z]{17}", "an EBS volume id",
                                       "vol-0123456789abcdef0")]
SnapshotId = Annotated[str, _matching(r"snap-[0-9a-z]{8}|snap-[0-9a-z]{17}",
                                      "an EBS snapshot id", "snap-0123456789abcdef0")]
AmiId = Annotated[str, _matching(r"ami-[0-9a-z]+", "an AMI id", "ami-0123456789abcdef0")]
#: The regions aws-parallelcluster 3.16.1 supports (its ``pcluster/resources/supported-regions``;
#: a unit test compares the installed package's file). A config for any other region cannot be
#: created, and no price is known for it.
PCLUSTER_REGIONS = frozenset({
    "af-south-1", "ap-east-1", "ap-northeast-1", "ap-northeast-2", "ap-south-1",
    "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-5", "ap-southeast-7",
    "ca-central-1", "cn-north-1", "cn-northwest-1", "eu-central-1", "eu-north-1", "eu-south-1",
    "eu-west-1", "eu-west-2", "eu-west-3", "il-central-1", "me-south-1", "sa-east-1",
    "us-east-1", "us-east-2", "us-iso-east-1", "us-iso-west-1", "us-isob-east-1",
    "us-gov-east-1", "us-gov-west-1", "us-west-1", "us-west-2",
})


def region_problem(value: str) -> str | None:
    """Why ``value`` is not a region ParallelCluster supports (:data:`PCLUSTER_REGIONS`), with the
    nearest supported name as a hint; None when it is one."""
    import difflib

    if value in PCLUSTER_REGIONS:
        return None
    near = difflib.get_close_matches(value.strip().lower(), sorted(PCLUSTER_REGIONS), n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return (f"not an AWS region aws-parallelcluster supports: expected e.g. 'us-east-1'{hint} "
            "(the list: pcluster/resources/supported-regions)")


def _known_region(value: str) -> str:
    if (problem := region_problem(value)) is not None:
        raise ValueError(problem)
    return value


Region = Annotated[str, AfterValidator(_known_region)]
# pcluster/constants.py PCLUSTER_NAME_REGEX with PCLUSTER_NAME_MAX_LENGTH 60 (3.16.1).
ClusterName = Annotated[str, _matching(r"[a-zA-Z][a-zA-Z0-9-]{0,59}",
                                       "a cluster name (a letter, then letters, digits and "
                                       "hyphens; at most 60 characters)", "train-p5")]


def cluster_name_problem(name: str) -> str | None:
    """Why ``name`` is not a cluster name (:data:`ClusterName`'s rule), or None."""
    from pydantic import TypeAdapter, ValidationError

    try:
        TypeAdapter(ClusterName).validate_python(name)
    except ValidationError as exc:
        return str(exc.errors(include_url=False)[0]["msg"]).removeprefix("Value error, ")
    return None


# "HH:MM" as FSx wants DailyAutomaticBackupStartTime.
TimeOfDay = Annotated[str, _matching(r"([01]\d|2[0-3]):[0-5]\d", "a time of day HH:MM (UTC)",
                                     "03:00")]

def _key_name(value: str) -> str:
    if not value:
        raise ValueError("an empty key pair name would leave HeadNode.Ssh out of the config; give "
                         "the EC2 key pair's name, or leave ssh_key out to log in with SSM only")
    if len(value) > 255:
        raise ValueError(f"{len(value)} characters; an EC2 key pair name has at most 255 "
                         "(EC2 CreateKeyPair, KeyName)")
    return value


#: An EC2 key pair name: 1 to 255 characters (EC2 API reference, CreateKeyPair ``KeyName``).
SshKeyName = Annotated[str, AfterValidator(_key_name)]


def _scalar(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError("a slurm.conf value is one text, number or true/false, not a "
                     f"{type(value).__name__}")


# A slurm.conf value: one scalar. Lists and mappings are refused here (ParallelCluster's schema
# takes any value and writes its text form into slurm.conf).
SlurmValue = Annotated[Any, AfterValidator(_scalar)]
