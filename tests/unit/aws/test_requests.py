"""botocore's offline parameter validation and SageMaker's ml. instance names."""

import pytest

from hpcflow.aws.requests import enum_values, request_problems, to_ec2_instance_type, to_ml_instance_type


def test_a_request_missing_required_members_is_named_by_botocore():
    problems = request_problems("sagemaker", "CreateCluster",
                                {"ClusterName": "c", "InstanceGroups": [{"InstanceGroupName": "g"}]})
    assert any('"InstanceCount"' in p and "InstanceGroups[0]" in p for p in problems)
    assert any('"ExecutionRole"' in p for p in problems)


def test_a_whole_request_has_no_problems():
    group = {"InstanceGroupName": "workers", "InstanceType": "ml.p5.48xlarge", "InstanceCount": 2,
             "LifeCycleConfig": {"SourceS3Uri": "s3://b/lc/", "OnCreate": "on_create.sh"},
             "ExecutionRole": "arn:aws:iam::123456789012:role/r"}
    assert request_problems("sagemaker", "CreateCluster",
                            {"ClusterName": "c", "InstanceGroups": [group]}) == []


def test_a_wrong_type_and_an_unknown_member_are_problems():
    problems = request_problems("sagemaker", "CreateCluster",
                                {"ClusterName": 3, "InstanceGroups": [], "Bogus": 1})
    assert any("ClusterName" in p for p in problems)
    assert any("Bogus" in p for p in problems)


def test_the_enums_come_from_the_model():
    assert "ml.p5.48xlarge" in enum_values("sagemaker", "ClusterInstanceType")
    assert "p3.2xlarge" in enum_values("ec2", "InstanceType")


@pytest.mark.parametrize(("ec2", "ml"), [("p5.48xlarge", "ml.p5.48xlarge"), ("g5.xlarge", "ml.g5.xlarge")])
def test_ml_names_round_trip(ec2, ml):
    assert to_ml_instance_type(ec2) == ml
    assert to_ml_instance_type(ml) == ml
    assert to_ec2_instance_type(ml) == ec2
    assert to_ec2_instance_type(ec2) == ec2


def test_constraints_botocore_leaves_to_the_service_are_read_from_the_model():
    from hpcflow.aws.requests import constraint_problems

    group = {"InstanceGroupName": "bad_name", "InstanceType": "ml.p5.48xl",
             "InstanceCount": 7000, "ExecutionRole": "arn:aws:iam::123456789012:role/r",
             "LifeCycleConfig": {"SourceS3Uri": "s3://b/lc/", "OnCreate": "on_create.sh"}}
    request = {"ClusterName": "c", "InstanceGroups": [group],
               "Tags": [{"Key": f"k{i}", "Value": "v"} for i in range(51)]}
    assert request_problems("sagemaker", "CreateCluster", request) == []  # botocore: fine
    problems = constraint_problems("sagemaker", "CreateCluster", request)
    assert "InstanceGroups[0].InstanceCount: 7000 is above the largest allowed, 6758" in problems
    assert any(p.startswith("InstanceGroups[0].InstanceGroupName: 'bad_name'") for p in problems)
    assert any(p.startswith("InstanceGroups[0].InstanceType: 'ml.p5.48xl' is not one of")
               for p in problems)
    assert "Tags: 51 items, at most 50 allowed" in problems
    group.update(InstanceGroupName="ok", InstanceType="ml.p5.48xlarge", InstanceCount=2)
    request["Tags"] = request["Tags"][:50]
    assert constraint_problems("sagemaker", "CreateCluster", request) == []
