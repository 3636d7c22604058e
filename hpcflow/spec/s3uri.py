"""``s3://bucket/prefix`` URIs: the one parser the job spec and the checkpoint mirror share.

Bucket names follow the S3 naming rules for general purpose buckets (3-63 characters: lowercase
letters, digits, dots and hyphens, starting and ending with a letter or digit, no ``..``;
https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html). The prefix is kept
to characters S3 calls safe for object keys (letters, digits and ``!-_.*'()/``;
https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html), without empty parts.
Pure: no boto3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A general purpose bucket name (the S3 naming rules above; ``..`` is refused separately).
BUCKET_PATTERN = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
_BUCKET_RE = re.compile(BUCKET_PATTERN)
_PREFIX_PART_RE = re.compile(r"[A-Za-z0-9!_.*'()-]+")

ALLOWED = ("s3://BUCKET or s3://BUCKET/PREFIX, where BUCKET is 3-63 lowercase letters, digits, "
           "dots and hyphens that start and end with a letter or digit, and PREFIX is parts of "
           "letters, digits and !-_.*'() separated by single '/'")


def is_bucket_name(name: str) -> bool:
    """Whether ``name`` follows the S3 naming rules for general purpose buckets (see above)."""
    return bool(_BUCKET_RE.fullmatch(name)) and ".." not in name


@dataclass(frozen=True)
class S3Uri:
    """A parsed ``s3://bucket/prefix``.

    Attributes:
        bucket: the bucket name.
        prefix: the key prefix without slashes at the ends ('' for the bucket's root).
    """

    bucket: str
    prefix: str

    def key(self, *parts: str) -> str:
        """The object key of ``parts`` under the prefix, joined with ``/``."""
        return "/".join(p for p in (self.prefix, *parts) if p)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


def parse_s3_uri(text: str) -> S3Uri:
    """Parse ``text`` as ``s3://bucket[/prefix][/]``.

    Raises:
        ValueError: ``text`` is not such a URI; the message says what is allowed (:data:`ALLOWED`).
    """
    if not isinstance(text, str) or not text.startswith("s3://"):
        raise ValueError(f"must start with 's3://'; allowed: {ALLOWED}")
    bucket, _, prefix = text[len("s3://"):].partition("/")
    if not is_bucket_name(bucket):
        raise ValueError(f"bucket {bucket!r} is not a valid S3 bucket name; allowed: {ALLOWED}")
    prefix = prefix[:-1] if prefix.endswith("/") else prefix
    if prefix and not all(_PREFIX_PART_RE.fullmatch(p) and p not in (".", "..")
                          for p in prefix.split("/")):
        raise ValueError(f"prefix {prefix!r} is not allowed; allowed: {ALLOWED}")
    return S3Uri(bucket, prefix)
