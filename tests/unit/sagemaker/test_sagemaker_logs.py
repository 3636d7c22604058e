"""Reading a training job's CloudWatch Logs from answers no real service would give: streams and
events of the wrong type are skipped and counted, tokens that never end and reads that never end
are bounded, every request passes botocore's validation, and CloudWatch's errors become
hpcflow's. (The real request and answer shapes, paging included, are tested against moto in
tests/integration/sagemaker/test_logs_report_moto.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from hpcflow.aws.requests import request_problems
from hpcflow.errors import Ec2Error, SpecError
from hpcflow.sagemaker import logs as cw

NAME = "tiny-dp-sm-20270115-080000"


class ClientError(Exception):
    """Shaped as botocore's: ``response["Error"]["Code"]``."""

    def __init__(self, code: str) -> None:
        super().__init__(f"An error occurred ({code})")
        self.response = {"Error": {"Code": code, "Message": "..."}}


class Scripted:
    """A CloudWatch Logs client answering from scripts; every request it gets is checked with
    botocore's validation, as boto3 would."""

    def __init__(self, streams: list[Any], events: dict[str, list[Any]]) -> None:
        self.stream_pages, self.event_pages = list(streams), {k: list(v) for k, v in events.items()}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _check(self, operation: str, params: dict[str, Any]) -> None:
        assert request_problems("logs", operation, params) == []
        self.calls.append((operation, params))

    def describe_log_streams(self, **params: Any) -> Any:
        self._check("DescribeLogStreams", params)
        answer = self.stream_pages.pop(0) if len(self.stream_pages) > 1 else self.stream_pages[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def get_log_events(self, **params: Any) -> Any:
        self._check("GetLogEvents", params)
        pages = self.event_pages[params["logStreamName"]]
        answer = pages.pop(0) if len(pages) > 1 else pages[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


S1, S2 = f"{NAME}/algo-1-1768464000", f"{NAME}/algo-2-1768464000"


def test_streams_and_events_of_the_wrong_shape_are_skipped_and_counted():
    client = Scripted(
        [{"logStreams": [{"logStreamName": S1}, {"logStreamName": S2}, "not a stream",
                         {"logStreamName": 5}, {"logStreamName": "other-job/algo-1-1"},
                         {"logStreamName": f"{NAME}/algo-1"}, {"logStreamName": f"{NAME}/x-1-1"}],
          "nextToken": "t1"},
         {"logStreams": "nope", "nextToken": "t1"}],  # a token seen before ends the listing
        {S1: [{"events": [{"timestamp": 1000, "message": "a"}, {"timestamp": True, "message": "b"},
                          {"timestamp": "2000", "message": "c"}, {"timestamp": -1, "message": "d"},
                          {"timestamp": 3000, "message": b"e"}, None, {"timestamp": 2**60,
                                                                        "message": "f"}],
               "nextForwardToken": "f/1"},
              {"events": [], "nextForwardToken": "f/1"}],
         S2: [{"events": [{"timestamp": 1500, "message": "g"}]}]})  # no token: read again later
    logs = cw.JobLogs(client, NAME)
    got = logs.read()
    assert [(x.host, x.message) for x in got] == [("algo-1", "a"), ("algo-2", "g")]
    # 5 streams + 1 listing; 6 events; S2's answer without a token
    assert logs.skipped == 5 + 1 + 6 + 1 and not logs.truncated
    assert [op for op, _ in client.calls].count("DescribeLogStreams") == 2
    first = [p for op, p in client.calls if op == "GetLogEvents" and p["logStreamName"] == S1]
    assert first[0] == {"logGroupName": cw.LOG_GROUP, "logStreamName": S1, "startFromHead": True}
    assert first[1]["nextToken"] == "f/1" and len(first) == 2


def test_a_read_goes_on_from_where_the_last_stopped():
    client = Scripted([{"logStreams": [{"logStreamName": S1}]}],
                      {S1: [{"events": [{"timestamp": 1, "message": "a"}], "nextForwardToken": "f/0"},
                            {"events": [], "nextForwardToken": "f/0"},
                            {"events": [{"timestamp": 2, "message": "b"}], "nextForwardToken": "f/1"},
                            {"events": [], "nextForwardToken": "f/1"}]})
    logs = cw.JobLogs(client, NAME, page_size=1)
    assert [x.message for x in logs.read()] == ["a"]
    assert [x.message for x in logs.read()] == ["b"]
    assert all(p.get("limit") == 1 for op, p in client.calls if op == "GetLogEvents")


def test_a_stream_that_never_ends_stops_at_the_page_bound(monkeypatch):
    monkeypatch.setattr(cw, "MAX_PAGES", 20)
    tokens = iter(range(10**6))

    class Endless(Scripted):
        def get_log_events(self, **params: Any) -> Any:
            self._check("GetLogEvents", params)
            return {"events": [{"timestamp": 1, "message": "x"}], "nextForwardToken": f"f/{next(tokens)}"}

    logs = cw.JobLogs(Endless([{"logStreams": [{"logStreamName": S1}]}], {}), NAME)
    assert len(logs.read()) == 19 and logs.truncated


def test_a_read_stops_after_the_page_that_passes_its_byte_bound():
    client = Scripted([{"logStreams": [{"logStreamName": S1}, {"logStreamName": S2}]}],
                      {S1: [{"events": [{"timestamp": 1, "message": "x" * 60}] * 2,
                             "nextForwardToken": "f/1"}, {"events": [], "nextForwardToken": "f/1"}],
                       S2: [{"events": [{"timestamp": 2, "message": "y"}], "nextForwardToken": "f/0"}]})
    logs = cw.JobLogs(client, NAME, max_bytes=100)
    assert len(logs.read()) == 2 and logs.truncated  # S2 is not read
    assert {p["logStreamName"] for op, p in client.calls if op == "GetLogEvents"} == {S1}


def test_only_the_hosts_streams_are_asked_for():
    client = Scripted([{"logStreams": [{"logStreamName": S1}, {"logStreamName": S2}]}],
                      {S1: [{"events": [], "nextForwardToken": "f/0"}]})
    logs = cw.JobLogs(client, NAME, host="algo-1")
    assert logs.read() == [] and logs.skipped == 1  # algo-2's stream under algo-1's prefix
    assert client.calls[0][1]["logStreamNamePrefix"] == f"{NAME}/algo-1-"


def test_a_missing_log_group_reads_as_empty_and_other_errors_are_said():
    missing = Scripted([ClientError("ResourceNotFoundException")], {})
    assert cw.JobLogs(missing, NAME).read() == []
    denied = Scripted([ClientError("AccessDeniedException")], {})
    with pytest.raises(Ec2Error, match=f"DescribeLogStreams for training job '{NAME}' failed: "
                                       r"ClientError: An error occurred \(AccessDeniedException\)"):
        cw.JobLogs(denied, NAME).read()


def test_a_request_botocore_refuses_is_never_sent():
    client = Scripted([{"logStreams": [{"logStreamName": S1}]}], {})
    with pytest.raises(SpecError, match="does not pass botocore's validation"):
        cw.JobLogs(client, NAME, page_size=-1).read()  # limit >= 1
    assert [op for op, _ in client.calls] == ["DescribeLogStreams"]


@pytest.mark.parametrize(("name", "want"), [
    (S1, ("algo-1", 1, 1768464000)), (f"{NAME}/algo-12-5", ("algo-12", 12, 5)),
    (f"{NAME}/algo-0-5", None), (f"{NAME}/algo-1-", None), (f"{NAME}x/algo-1-5", None),
    (f"{NAME}/algo-1-5/extra", None), (None, None), (7, None)])
def test_parse_stream(name, want):
    got = cw.parse_stream(NAME, name)
    assert (None if got is None else (got.host, got.index, got.epoch)) == want


def test_follow_stops_at_the_final_status_after_one_more_read():
    client = Scripted([{"logStreams": []}], {})
    statuses = iter(["InProgress", "Stopping", "Stopped", "never asked"])
    slept: list[float] = []
    assert list(cw.follow(cw.JobLogs(client, NAME), lambda: next(statuses),
                          final=("Completed", "Failed", "Stopped"), interval_s=0.5,
                          sleep=slept.append)) == []
    assert slept == [0.5, 0.5] and [op for op, _ in client.calls].count("DescribeLogStreams") == 3


@pytest.mark.parametrize(("final", "code"), [("Completed", 0), ("Stopped", 1), ("Failed", 1)])
def test_logs_follow_exits_1_unless_the_job_completed(monkeypatch, final, code):
    from click.testing import CliRunner

    from hpcflow.cli.main import cli
    from hpcflow.sagemaker import service

    client = Scripted([{"logStreams": [{"logStreamName": S1}]}],
                      {S1: [{"events": [{"timestamp": 1, "message": "a\nb"}],
                             "nextForwardToken": "f/0"}, {"events": [], "nextForwardToken": "f/0"}]})
    statuses = iter(["InProgress", final])
    monkeypatch.setattr(cw, "make_logs_client", lambda: client)
    monkeypatch.setattr(cw, "FOLLOW_INTERVAL_S", 0.0)
    monkeypatch.setattr(service, "make_client", lambda: None)
    monkeypatch.setattr(service, "describe", lambda name, client=None: {
        "TrainingJobName": name, "TrainingJobStatus": next(statuses)})
    out = CliRunner().invoke(cli, ["sagemaker", "logs", NAME, "-f"])
    assert out.exit_code == code, out.output
    assert out.stdout == "algo-1 a\nalgo-1 b\n"
    assert (f"training job {NAME} ended {final}" in out.stderr) is (code == 1)
