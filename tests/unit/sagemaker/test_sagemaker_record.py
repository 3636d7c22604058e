"""The typed record of a DescribeTrainingJob response: every member of its type, or left out and
counted; hostile responses (wrong types, booleans for numbers, times that are not times, control
characters, a transition list that is not one) never raise."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hpcflow.sagemaker.record import (
    MAX_TEXT,
    MAX_TRANSITIONS,
    TrainingJobRecord,
    decode_describe,
    unix_seconds,
)
from hpcflow.sagemaker.status import status_from_describe

T0 = datetime(2027, 1, 15, 8, 0, 0, tzinfo=UTC)
S0 = T0.timestamp()

GOOD = {
    "TrainingJobName": "tiny-dp-sm-20270115-080000", "TrainingJobStatus": "Completed",
    "SecondaryStatus": "Completed", "CreationTime": T0,
    "TrainingStartTime": T0 + timedelta(seconds=120), "TrainingEndTime": T0 + timedelta(hours=1),
    "LastModifiedTime": T0 + timedelta(hours=1), "TrainingTimeInSeconds": 3480,
    "BillableTimeInSeconds": 1044, "EnableManagedSpotTraining": True,
    "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
    "SecondaryStatusTransitions": [
        {"Status": "Starting", "StartTime": T0, "EndTime": T0 + timedelta(seconds=120),
         "StatusMessage": "Preparing the instances for training"},
        {"Status": "Training", "StartTime": T0 + timedelta(seconds=300),
         "StatusMessage": "Training image download completed. Training in progress."},
    ],
}


def test_a_well_formed_response_decodes_whole():
    rec = decode_describe(GOOD)
    assert rec.skipped == 0
    assert (rec.name, rec.status, rec.secondary) == ("tiny-dp-sm-20270115-080000", "Completed",
                                                     "Completed")
    assert rec.created == S0 and rec.training_start == S0 + 120 and rec.training_end == S0 + 3600
    assert (rec.training_s, rec.billable_s, rec.spot) == (3480, 1044, True)
    assert (rec.instance_type, rec.instance_count) == ("ml.g5.12xlarge", 2)
    assert [t.status for t in rec.transitions] == ["Starting", "Training"]
    assert rec.transitions[0].end == S0 + 120 and rec.transitions[1].end is None
    assert rec.spot_saving == 0.7 and rec.finished


@pytest.mark.parametrize(("change", "skipped", "check"), [
    pytest.param({"TrainingTimeInSeconds": True}, 1, lambda r: r.training_s is None,
                 id="boolean-is-not-a-number"),
    pytest.param({"BillableTimeInSeconds": "1044"}, 1, lambda r: r.billable_s is None,
                 id="text-is-not-a-number"),
    pytest.param({"BillableTimeInSeconds": -5}, 1, lambda r: r.spot_saving is None,
                 id="negative-seconds"),
    pytest.param({"TrainingTimeInSeconds": 10**30}, 1, lambda r: r.training_s is None,
                 id="huge-seconds"),
    pytest.param({"CreationTime": "yesterday"}, 1, lambda r: r.created is None,
                 id="time-that-is-not-one"),
    pytest.param({"CreationTime": float("nan")}, 1, lambda r: r.created is None, id="nan-time"),
    pytest.param({"TrainingEndTime": 1e300}, 1, lambda r: r.training_end is None,
                 id="time-past-year-9999"),
    pytest.param({"TrainingJobStatus": ["Completed"]}, 1, lambda r: not r.finished,
                 id="status-that-is-a-list"),
    pytest.param({"EnableManagedSpotTraining": "true"}, 1, lambda r: r.spot is False,
                 id="spot-flag-as-text"),
    pytest.param({"ResourceConfig": "ml.g5.12xlarge"}, 1, lambda r: r.instance_count is None,
                 id="resource-config-as-text"),
    pytest.param({"ResourceConfig": {"InstanceType": 5, "InstanceCount": 2.5}}, 2,
                 lambda r: (r.instance_type, r.instance_count) == ("", None),
                 id="resource-config-members-of-wrong-types"),
    pytest.param({"SecondaryStatusTransitions": {"Status": "Training"}}, 1,
                 lambda r: r.transitions == (), id="transitions-not-a-list"),
    pytest.param({"SecondaryStatusTransitions": [
        "Training", {"Status": 7, "StartTime": T0}, {"Status": "Training"},
        {"Status": "Training", "StartTime": T0, "EndTime": "later", "StatusMessage": 3}]}, 5,
        lambda r: [(t.status, t.end, t.message) for t in r.transitions] == [("Training", None, "")],
        id="hostile-transitions"),
    pytest.param({"FailureReason": "\x1b[2Jboom\x07" + "x" * 5000}, 0,
                 lambda r: r.failure_reason.startswith("?[2Jboom?") and
                 len(r.failure_reason) == MAX_TEXT, id="control-characters-and-length"),
])
def test_members_of_the_wrong_type_are_left_out_and_counted(change, skipped, check):
    rec = decode_describe({**GOOD, **change})
    assert rec.skipped == skipped
    assert check(rec)


@pytest.mark.parametrize("response", [None, [], "Completed", 42, {"TrainingJobName": None}])
def test_what_is_not_a_response_gives_an_empty_record(response):
    rec = decode_describe(response)
    assert rec.transitions == () and rec.name == "" and not rec.finished
    assert rec.skipped == (0 if isinstance(response, dict) else 1)


def test_transitions_are_kept_oldest_first_and_bounded():
    shuffled = [{"Status": s, "StartTime": T0 + timedelta(seconds=i)}
                for i, s in reversed(list(enumerate(["Starting", "Training", "Completed"])))]
    assert [t.status for t in decode_describe({"SecondaryStatusTransitions": shuffled}
                                              ).transitions] == ["Starting", "Training", "Completed"]
    many = [{"Status": "Training", "StartTime": S0 + i} for i in range(MAX_TRANSITIONS + 7)]
    rec = decode_describe({"SecondaryStatusTransitions": many})
    assert len(rec.transitions) == MAX_TRANSITIONS and rec.skipped == 7
    assert rec.transitions[-1].start == S0 + MAX_TRANSITIONS + 6  # the newest are kept


@pytest.mark.parametrize(("value", "want"), [
    (T0, S0), (T0.replace(tzinfo=None), S0), ("2027-01-15T08:00:00Z", S0),
    ("2027-01-15T09:00:00+01:00", S0), (S0, S0), (int(S0), S0),
    (True, None), ("", None), ("x" * 100, None), (-1, None), (float("inf"), None), ({}, None),
])
def test_unix_seconds(value, want):
    assert unix_seconds(value) == want


def test_status_reads_through_the_record_and_survives_a_hostile_response():
    st = status_from_describe({**GOOD, "SecondaryStatusTransitions": [
        None, {"Status": "Interrupted", "StartTime": T0, "StatusMessage": 5}]})
    assert st.interruptions == 1 and st.skipped == 2
    assert st.transitions == [{"status": "Interrupted", "start": "2027-01-15T08:00:00Z",
                               "message": ""}]
    assert status_from_describe("garbage").to_dict()["skipped"] == 1
    assert TrainingJobRecord().spot_saving is None
