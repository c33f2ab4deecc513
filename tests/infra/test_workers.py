"""Fargate workers: the image's command, graceful stops, logs, and scaling on queue depth."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from duetime.domain.jobs import Runtime
from duetime.settings import Env
from infra.constructs.workers import WORKER_COMMAND, scaling_steps
from tests.infra.conftest import REPO_ROOT, Synth


def _container(synth: Synth) -> dict[str, Any]:
    (task,) = synth.of_type("AWS::ECS::TaskDefinition").values()
    (container,) = task["Properties"]["ContainerDefinitions"]
    return dict(container)


def test_task_runs_the_worker_on_arm64(synth: Synth) -> None:
    (task,) = synth.of_type("AWS::ECS::TaskDefinition").values()
    container = _container(synth)

    assert task["Properties"]["RuntimePlatform"]["CpuArchitecture"] == "ARM64"
    assert task["Properties"]["RequiresCompatibilities"] == ["FARGATE"]
    assert container["Command"][:2] == ["--concurrency", "32"]
    assert "--stop-timeout-seconds" in container["Command"]
    # A root file system it cannot write to (an outside audit: it could), as the worker writes
    # nothing to disk.
    assert container["ReadonlyRootFilesystem"] is True
    # ...but for /tmp, a scratch volume of the task (operator handlers may write temp files)
    assert container["MountPoints"] == [
        {"ContainerPath": "/tmp", "ReadOnly": False, "SourceVolume": "scratch"}
    ]
    assert task["Properties"]["Volumes"] == [{"Name": "scratch"}]


def test_graceful_stop_fits_in_the_container_stop_timeout(synth: Synth) -> None:
    container = _container(synth)
    worker_timeout = int(
        container["Command"][container["Command"].index("--stop-timeout-seconds") + 1]
    )

    assert container["StopTimeout"] >= 90
    assert worker_timeout < container["StopTimeout"]


def test_logs_go_to_cloudwatch(synth: Synth) -> None:
    logging = _container(synth)["LogConfiguration"]
    group = synth.logical_id("Scheduler/Workers/Logs")

    assert logging["LogDriver"] == "awslogs"
    assert logging["Options"]["awslogs-group"] == {"Ref": group}


def test_container_environment_names_come_from_duetime_config(synth: Synth) -> None:
    names = {variable["Name"] for variable in _container(synth)["Environment"]}
    env_names = {v for k, v in vars(Env).items() if k.isupper()}

    assert {Env.JOBS_TABLE, Env.TIMERS_TABLE, Env.RUNS_TABLE, Env.QUEUES} <= names
    assert names <= env_names | {n for n in names if n.startswith("POWERTOOLS_")}


def test_service_scales_on_the_fargate_queues_depth(synth: Synth) -> None:
    (target,) = synth.of_type("AWS::ApplicationAutoScaling::ScalableTarget").values()
    policies = synth.of_type("AWS::ApplicationAutoScaling::ScalingPolicy")
    fargate_queues = {queue for queue, _ in synth.queue_ids(Runtime.FARGATE)}

    assert target["Properties"]["MinCapacity"] == 0
    assert target["Properties"]["MaxCapacity"] == 10
    assert {p["Properties"]["PolicyType"] for p in policies.values()} == {"StepScaling"}
    alarms = [
        a["Properties"]
        for a in synth.of_type("AWS::CloudWatch::Alarm").values()
        if any({"Ref": policy} in a["Properties"].get("AlarmActions", []) for policy in policies)
    ]
    assert len(alarms) == 2  # scale out on a backlog, back to the minimum without one
    for alarm in alarms:
        queues = {
            dim["Value"]["Fn::GetAtt"][0]
            for metric in alarm["Metrics"]
            if "MetricStat" in metric
            for dim in metric["MetricStat"]["Metric"]["Dimensions"]
        }
        assert queues == fargate_queues


def test_a_deploy_leaves_the_task_count_to_the_scaling(synth: Synth) -> None:
    """With a DesiredCount in the template, every deploy that updates the service set the count
    back to it (the minimum, 0), stopping the tasks scaled out for a backlog mid-burst (found by
    an outside audit). Without one, CloudFormation keeps the current count on an update (and
    starts one task on creation, which the scaling takes back to the minimum)."""
    (service,) = synth.of_type("AWS::ECS::Service").values()
    assert "DesiredCount" not in service["Properties"]


@pytest.mark.parametrize(
    ("min_tasks", "max_tasks", "slots"), [(0, 10, 8), (1, 3, 4), (0, 1, 8), (2, 40, 1)]
)
def test_scaling_steps_cover_the_backlog_in_order(
    min_tasks: int, max_tasks: int, slots: int
) -> None:
    steps = scaling_steps(min_tasks, max_tasks, slots)

    assert (steps[0].upper, steps[0].change) == (0, min_tasks)
    assert (steps[-1].upper, steps[-1].change) == (None, max_tasks)
    changes = [s.change for s in steps[1:]]
    assert changes == sorted(changes)
    assert all(1 <= c <= max_tasks for c in changes)
    assert steps[1].lower == 1
    for previous, step in itertools.pairwise(steps[1:]):
        assert previous.upper == step.lower


def test_dockerfile_runs_the_fargate_worker() -> None:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text().splitlines()
    entrypoint = [line for line in dockerfile if line.startswith("ENTRYPOINT")]

    assert next(line for line in dockerfile if line.startswith("FROM")) == ("FROM python:3.11-slim")
    assert [json.loads(line.removeprefix("ENTRYPOINT").strip()) for line in entrypoint] == [
        list(WORKER_COMMAND)
    ]
    assert any(line.startswith("USER ") for line in dockerfile)  # not root
    ignored = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    assert next(line for line in ignored if not line.startswith("#")) == "*"  # an allow-list


def test_only_the_workers_read_the_claim_lead(synth: Synth) -> None:
    """Lambda worker and Fargate task; not the other functions (their 4 KB environment holds
    the lanes' queue names)."""
    variables = {n: v["Value"] for v in _container(synth)["Environment"] for n in [v["Name"]]}
    _, worker = synth.function("worker")
    _, api = synth.function("api")

    assert variables[Env.CLAIM_LEAD_MS] == "1000"
    assert worker["Environment"]["Variables"][Env.CLAIM_LEAD_MS] == "1000"
    assert Env.CLAIM_LEAD_MS not in api["Environment"]["Variables"]
