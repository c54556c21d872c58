"""The fan-out example: ``ctx.map`` with a failure tolerance of a quarter of the items."""

from __future__ import annotations

import pytest

from examples.fan_out import render_gallery
from relayflow.testing import WorkflowTestEnv


@pytest.fixture
def env() -> WorkflowTestEnv:
    return WorkflowTestEnv(workflows=[render_gallery])


def test_every_image_gets_a_thumbnail(env: WorkflowTestEnv) -> None:
    run = env.trigger(render_gallery, {"gallery": "g-1", "images": ["a.jpg", "b.png"]})
    assert run.status == "completed"
    assert run.output == {
        "gallery": "g-1",
        "thumbnails": ["a-256.webp", "b-256.webp"],
        "failed": [],
        "published": 2,
        "completion": "ALL_COMPLETED",
    }


def test_one_failure_in_four_is_tolerated(env: WorkflowTestEnv) -> None:
    images = ["a.jpg", "notes.txt", "c.jpg", "d.webp"]
    run = env.trigger(render_gallery, {"gallery": "g-1", "images": images, "size": 64})
    assert run.status == "completed"
    assert run.output["thumbnails"] == ["a-64.webp", "c-64.webp", "d-64.webp"]
    assert run.output["failed"] == ["notes.txt"]
    assert run.output["published"] == 3


@pytest.mark.parametrize(
    "images",
    [
        ["a.jpg", "notes.txt", "c.jpg", "readme.md"],
        ["x.txt"],
    ],
)
def test_more_failures_than_tolerated_fail_the_run(env: WorkflowTestEnv, images: list[str]) -> None:
    run = env.trigger(render_gallery, {"gallery": "g-1", "images": images})
    assert run.status == "failed"
    assert run.error is not None and run.error.code == "TOO_MANY_FAILURES"


def test_each_image_renders_in_its_own_child_context(env: WorkflowTestEnv) -> None:
    run = env.trigger(render_gallery, {"gallery": "g-1", "images": ["a.jpg", "b.png", "c.jpg"]})
    timeline = env.get_run(run.id).timeline
    renders = [e.id for e in timeline if e.type == "step" and e.id.endswith("/render")]
    assert len(renders) == 3
    assert len(set(renders)) == 3
