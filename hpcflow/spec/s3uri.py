"""``s3://bucket/prefix`` URIs: the one parser the job spec and the checkpoint mirror share.

Bucket names follow the S3 naming rules for general purpose buckets (3-63 characters: lowercase
letters, digits, dots and hyphens, starting and ending with a letter or digit, no ``..``, not an
IP address, none of the prefixes and suffixes S3 reserves;
https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html). The prefix is kept
to characters S3 calls safe for object keys (letters, digits and ``!-_.*'()/``;
https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html), without empty parts.
Pure: no boto3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The characters and length of a general purpose bucket name; :func:`bucket_name_problem` adds
#: the rest of the rule (no ``..``, no IP address, reserved prefixes and suffixes).
BUCKET_PATTERN = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
_BUCKET_RE = re.compile(BUCKET_PATTERN)
_IP_RE = re.compile(r"\d{1,3}(\.\d{1,3}){3}")
#: Prefixes and suffixes S3 reserves (the naming rules page above, "General purpose buckets
#: naming rules"): access point aliases, Object Lambda, Multi-Region Access Points, directory
#: and table buckets.
RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
#: An S3 object key's most bytes, UTF-8 (Amazon S3 User Guide, "Naming Amazon S3 objects": "The
#: object key name ... can be up to 1,024 bytes long").
MAX_KEY_BYTES = 1024
#: The most bytes of a prefix: the rest of a key is the checkpoint folder and file names the S3
#: mirror puts after it (``<prefix>/<step folder>/<file>``).
MAX_PREFIX_BYTES = MAX_KEY_BYTES - 256
_PREFIX_PART_RE = re.compile(r"[A-Za-z0-9!_.*'()-]+")

ALLOWED = ("s3://BUCKET or s3://BUCKET/PREFIX, where BUCKET is 3-63 lowercase letters, digits, "
           "dots and hyphens that start and end with a letter or digit, and PREFIX is parts of "
           "letters, digits and !-_.*'() separated by single '/'")


def bucket_name_problem(name: str) -> str | None:
    """What breaks the S3 naming rules for general purpose buckets (see above) in ``name``, or
    None when it follows them."""
    if not _BUCKET_RE.fullmatch(name):
        return ("3-63 lowercase letters, digits, dots and hyphens that start and end with a "
                "letter or digit")
    if ".." in name:
        return "two dots in a row are not allowed"
    if _IP_RE.fullmatch(name):
        return "a bucket name cannot be an IP address"
    for prefix in RESERVED_PREFIXES:
        if name.startswith(prefix):
            return f"the prefix {prefix!r} is reserved by S3"
    for suffix in RESERVED_SUFFIXES:
        if name.endswith(suffix):
            return f"the suffix {suffix!r} is reserved by S3"
    return None


def is_bucket_name(name: str) -> bool:
    """Whether ``name`` follows the S3 naming rules for general purpose buckets (see above)."""
    return bucket_name_problem(name) is None


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
    if (problem := bucket_name_problem(bucket)) is not None:
        raise ValueError(f"bucket {bucket!r} is not a valid S3 bucket name ({problem}); "
                         f"allowed: {ALLOWED}")
    prefix = prefix[:-1] if prefix.endswith("/") else prefix
    if len(prefix.encode("utf-8")) > MAX_PREFIX_BYTES:
        raise ValueError(f"prefix of {len(prefix.encode('utf-8')):,} bytes is too long: at most "
                         f"{MAX_PREFIX_BYTES} bytes (an S3 key has at most {MAX_KEY_BYTES:,}, and "
                         f"{MAX_KEY_BYTES - MAX_PREFIX_BYTES} are kept for the checkpoint folder "
                         "and file names put after it)")
    if prefix and not all(_PREFIX_PART_RE.fullmatch(p) and p not in (".", "..")
                          for p in prefix.split("/")):
        raise ValueError(f"prefix {prefix!r} is not allowed; allowed: {ALLOWED}")
    return S3Uri(bucket, prefix)
