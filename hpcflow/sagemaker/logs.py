"""A SageMaker training job's CloudWatch Logs: its streams, their events, and following them.

SageMaker sends what a training container prints to CloudWatch Logs, log group
``/aws/sagemaker/TrainingJobs``, one stream per instance and container start named
``<training-job-name>/algo-<instance-number-in-cluster>-<epoch_timestamp>`` (SageMaker developer
guide, "Log groups and streams that Amazon SageMaker AI sends to Amazon CloudWatch Logs",
https://docs.aws.amazon.com/sagemaker/latest/dg/logging-cloudwatch.html). Streams are listed with
``DescribeLogStreams`` (``logStreamNamePrefix``, ``nextToken`` paging) and read with
``GetLogEvents`` (``startFromHead``, then ``nextToken``): "If you have reached the end of the
stream, it returns the same token you passed in" (CloudWatch Logs API Reference, GetLogEvents,
https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_GetLogEvents.html).

Every request is checked with botocore's own parameter validation before it is sent
(:func:`hpcflow.aws.requests.request_problems`); only stream names of the job's shape are read
(bounded, so they pass it). Every answer is untrusted: a stream or event of the wrong type is
skipped and counted, the text read is bounded (:data:`MAX_BYTES`) and
so are the pages asked for (:data:`MAX_PAGES`). The client comes from boto3's standard chain
(``AWS_ENDPOINT_URL_CLOUDWATCH_LOGS`` or ``AWS_ENDPOINT_URL`` picks another endpoint) or is
passed in.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from hpcflow.contract import is_int
from hpcflow.errors import Ec2Error, SpecError

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
SERVICE = "logs"
#: The part of a stream name after ``<job>/``: the host (``algo-1``) and the container start.
STREAM_TAIL_RE = re.compile(r"(?P<host>algo-(?P<index>[1-9][0-9]{0,5}))-(?P<epoch>[0-9]{1,16})")
#: The most text read from a job's streams in one read, in characters (a report reads the
#: first 64 MiB of rank 0's lines, as ``hpcflow report`` reads the last 64 MiB of a Slurm log).
MAX_BYTES = 64 * 1024 * 1024
#: The most pages asked for in one read (``DescribeLogStreams`` and ``GetLogEvents`` together).
MAX_PAGES = 5000
#: Seconds between two looks while following.
FOLLOW_INTERVAL_S = 5.0


@dataclass(frozen=True)
class LogStream:
    """One stream of the job.

    Attributes:
        name: the stream's full name (``<job>/algo-1-1768464000``).
        host: the instance (``algo-1``): SageMaker's hosts are ``algo-1`` .. ``algo-N``.
        index: the host's number (1 for ``algo-1``).
        epoch: the number after the host: the container's start (Unix seconds).
    """

    name: str
    host: str
    index: int
    epoch: int


@dataclass(frozen=True)
class LogLine:
    """One log event.

    Attributes:
        stream: the stream's full name.
        host: its instance (``algo-1``).
        time_ms: the event's ``timestamp`` (Unix milliseconds).
        message: the event's ``message`` (one print; may hold several lines).
    """

    stream: str
    host: str
    time_ms: int
    message: str


def make_logs_client(region: str | None = None) -> Any:
    """A CloudWatch Logs client from boto3's standard chain (see the module docstring)."""
    import boto3

    return boto3.session.Session(region_name=region).client("logs")


def parse_stream(job_name: str, name: Any) -> LogStream | None:
    """The :class:`LogStream` of a stream name of ``job_name``, or None when ``name`` is not one
    (another job's, another shape, not text)."""
    if not isinstance(name, str) or not name.startswith(job_name + "/"):
        return None
    m = STREAM_TAIL_RE.fullmatch(name[len(job_name) + 1:])
    if m is None:
        return None
    return LogStream(name, m["host"], int(m["index"]), int(m["epoch"]))


class JobLogs:
    """Reads a job's streams from where it last stopped: :meth:`read` gives the events added
    since the last read, oldest first (streams in container-start order, then host order).

    Args:
        client: a boto3 CloudWatch Logs client.
        job_name: the training job (already checked as a ``TrainingJobName``).
        host: read only this instance's streams (``algo-1``), or every stream.
        page_size: ``limit`` of each ``GetLogEvents`` (None: the service's default).
        max_bytes: the most text one :meth:`read` keeps; past it, ``truncated`` is set.
    """

    def __init__(self, client: Any, job_name: str, *, host: str | None = None,
                 page_size: int | None = None, max_bytes: int = MAX_BYTES) -> None:
        self.client, self.job_name, self.host = client, job_name, host
        self.page_size, self.max_bytes = page_size, max_bytes
        self.streams: dict[str, LogStream] = {}
        self.tokens: dict[str, str] = {}
        #: Streams, events and pages left out because they were not of their type.
        self.skipped = 0
        #: A read stopped at :data:`MAX_BYTES` or :data:`MAX_PAGES`.
        self.truncated = False
        self._pages = 0

    def read(self) -> list[LogLine]:
        """The events added to the job's streams since the last read.

        Raises:
            Ec2Error: CloudWatch Logs could not be asked (the message carries its error); a log
                group or stream that does not exist yet reads as empty.
        """
        self._pages, budget = 0, self.max_bytes
        self._list_streams()
        out: list[LogLine] = []
        for stream in sorted(self.streams.values(), key=lambda s: (s.epoch, s.index, s.name)):
            lines, budget = self._read_stream(stream, budget)
            out.extend(lines)
            if budget <= 0 or self._pages >= MAX_PAGES:
                self.truncated = True
                break
        return sorted(out, key=lambda line: line.time_ms)  # stable: stream order within a ms

    def _list_streams(self) -> None:
        prefix = f"{self.job_name}/{self.host}-" if self.host else f"{self.job_name}/"
        params: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamNamePrefix": prefix}
        seen: set[str] = set()
        while self._pages < MAX_PAGES:
            answer = self._call("DescribeLogStreams", params, missing_ok=True)
            for item in _list(answer, "logStreams", self):
                stream = parse_stream(self.job_name, item.get("logStreamName"))
                if stream is None or (self.host and stream.host != self.host):
                    self.skipped += 1
                else:
                    self.streams.setdefault(stream.name, stream)
            token = answer.get("nextToken")
            if not isinstance(token, str) or not token or token in seen:
                return
            seen.add(token)
            params = {**params, "nextToken": token}

    def _read_stream(self, stream: LogStream, budget: int) -> tuple[list[LogLine], int]:
        """Whole pages of one stream from its last token until its end, the page bound, or
        ``budget`` characters (overshot by one page at most: 1 MB in CloudWatch Logs)."""
        out: list[LogLine] = []
        while budget > 0 and self._pages < MAX_PAGES:
            token = self.tokens.get(stream.name)
            params: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamName": stream.name}
            params.update({"nextToken": token} if token else {"startFromHead": True})
            if self.page_size:
                params["limit"] = self.page_size
            answer = self._call("GetLogEvents", params, missing_ok=True)
            for event in _list(answer, "events", self):
                stamp, message = event.get("timestamp"), event.get("message")
                if not is_int(stamp) or stamp < 0 or not isinstance(message, str):
                    self.skipped += 1
                    continue
                budget -= len(message)
                out.append(LogLine(stream.name, stream.host, int(stamp), message))
            following = answer.get("nextForwardToken")
            if not isinstance(following, str) or not following:
                self.skipped += bool(answer)  # no token: the next read starts from the last one
                return out, budget
            self.tokens[stream.name] = following
            if following == token:  # the end of the stream, for now
                return out, budget
        return out, budget

    def _call(self, operation: str, params: dict[str, Any], *, missing_ok: bool) -> Mapping[str, Any]:
        """One request, checked by botocore's validation first; a missing group or stream
        (``ResourceNotFoundException``) answers ``{}`` when ``missing_ok``."""
        if problems := request_problems_for(operation, params):
            raise SpecError(f"CloudWatch Logs {operation} request for {self.job_name!r} does not "
                            "pass botocore's validation: " + "; ".join(problems))
        self._pages += 1
        method = getattr(self.client, _snake(operation))
        try:
            answer = method(**params)
        except Exception as exc:  # noqa: BLE001 - botocore's errors, reported with their text
            code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
            if missing_ok and code == "ResourceNotFoundException":
                return {}
            raise Ec2Error(f"CloudWatch Logs {operation} for training job {self.job_name!r} "
                           f"failed: {type(exc).__name__}: {exc}") from None
        if not isinstance(answer, Mapping):
            self.skipped += 1
            return {}
        return answer


def request_problems_for(operation: str, params: Mapping[str, Any]) -> list[str]:
    """botocore's parameter validation of one CloudWatch Logs request (``[]``: it passes)."""
    from hpcflow.aws.requests import request_problems

    return request_problems(SERVICE, operation, params)


def follow(logs: JobLogs, job_status: Callable[[], str], *, final: tuple[str, ...],
           interval_s: float | None = None,
           sleep: Callable[[float], None] = time.sleep) -> Iterator[LogLine]:
    """Every event of the job's streams as it comes, until ``job_status()`` (the job's
    ``TrainingJobStatus``) is one of ``final``; ``sleep(interval_s)`` between two reads
    (default :data:`FOLLOW_INTERVAL_S`).

    The status is asked before each read, so the read after the job's end takes everything the
    job wrote until then.

    Raises:
        Ec2Error: CloudWatch Logs could not be asked; whatever ``job_status`` raises.
    """
    interval_s = FOLLOW_INTERVAL_S if interval_s is None else interval_s
    while True:
        done = job_status() in final
        yield from logs.read()
        if done:
            return
        sleep(interval_s)


def _list(answer: Mapping[str, Any], key: str, logs: JobLogs) -> list[Mapping[str, Any]]:
    """The mappings of ``answer[key]``; what is not one is skipped and counted."""
    value = answer.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        logs.skipped += 1
        return []
    items = [v for v in value if isinstance(v, Mapping)]
    logs.skipped += len(value) - len(items)
    return items


def _snake(operation: str) -> str:
    """``GetLogEvents`` -> ``get_log_events`` (boto3's method names)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower()
