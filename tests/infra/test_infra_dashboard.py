"""The CloudWatch dashboard graphs what the functions emit, under the names they emit it."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Template
from infra_asserts import resources

from relayflow.api import metrics as m
from relayflow.cdk.dashboard import WORKFLOW_SCHEMA


def _body(template: Template) -> dict[str, Any]:
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    # The body is a Fn::Join of text and resource references; the references are not needed
    # to read which metrics it graphs.
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
    text = "".join(part if isinstance(part, str) else "ref" for part in parts)
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def _titles_and_searches(body: dict[str, Any]) -> dict[str, list[str]]:
    graphs: dict[str, list[str]] = {}
    for widget in body["widgets"]:
        properties = widget["properties"]
        graphs[properties["title"]] = [
            entry[0]["expression"]
            for entry in properties.get("metrics", [])
            if isinstance(entry[0], dict) and "expression" in entry[0]
        ]
    return graphs


#: What people on call read first: runs, steps, queues and alarms of each workflow.
ON_CALL = {
    m.RUNS_STARTED,
    m.RUNS_COMPLETED,
    m.RUNS_FAILED,
    m.STEPS_ATTEMPTS,
    m.STEPS_RETRIED,
    m.QUEUE_DEPTH,
    m.ALARMS_LATENESS,
}


def test_the_dashboard_graphs_every_emitted_metric_per_workflow(sample_template: Template) -> None:
    (dashboard,) = resources(sample_template, "AWS::CloudWatch::Dashboard").values()
    assert dashboard["Properties"]["DashboardName"] == "relayflow-dev"
    expressions = [
        e for exprs in _titles_and_searches(_body(sample_template)).values() for e in exprs
    ]
    searches = [e for e in expressions if e.startswith("SEARCH(")]
    scoped = f'SEARCH(\'{WORKFLOW_SCHEMA} {m.ENVIRONMENT_DIMENSION}="dev" MetricName='
    assert searches and all(search.startswith(scoped) for search in searches)
    graphed = {search.split('MetricName="')[1].split('"')[0] for search in searches}
    assert graphed == ON_CALL
    assert set(m.WORKFLOW_GAUGES) <= graphed
    assert graphed <= set(m.WORKFLOW_COUNTERS) | set(m.WORKFLOW_GAUGES), "only emitted names"


def test_the_dashboard_shows_lambda_dynamodb_and_sqs_health(sample_template: Template) -> None:
    body = _body(sample_template)
    plain = [
        (entry[0], entry[1])
        for widget in body["widgets"]
        for entry in widget["properties"].get("metrics", [])
        if isinstance(entry[0], str)
    ]
    assert plain.count(("AWS/Lambda", "Errors")) == 4
    assert plain.count(("AWS/Lambda", "Duration")) == 4
    assert plain.count(("AWS/SQS", "ApproximateAgeOfOldestMessage")) == 2
    searches = json.dumps(body)
    assert "ThrottledRequests" in searches


def test_the_dashboard_can_be_turned_off(variant_template: Template) -> None:
    assert resources(variant_template, "AWS::CloudWatch::Dashboard") == {}
