"""A fan-out: render a thumbnail for every image of a gallery with ``ctx.map``, at most four
at a time, tolerating up to a quarter of the images failing, then publish what rendered.

Try it on the local stack (``make dev``)::

    relayflow trigger media.thumbnails --wait \\
        --input '{"gallery": "g-1", "images": ["a.jpg", "b.png", "notes.txt", "c.jpg"]}'
"""

from __future__ import annotations

from typing import Any

from relayflow import CompletionPolicy, FatalError, WorkflowContext, workflow

#: Up to 25 % of the images may fail; one more failure stops the batch.
TOLERANCE = CompletionPolicy(tolerated_failure_percentage=25)
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")


def render_thumbnail(image: str, size: int) -> dict[str, Any]:
    """Render one thumbnail; files that are not images fail for good."""
    if not image.lower().endswith(IMAGE_SUFFIXES):
        raise FatalError(f"{image} is not an image", code="NOT_AN_IMAGE")
    stem = image.rsplit(".", 1)[0]
    return {"image": image, "thumbnail": f"{stem}-{size}.webp"}


def publish_gallery(gallery: str, thumbnails: list[dict[str, Any]]) -> dict[str, Any]:
    """Publish the gallery page with its thumbnails."""
    return {"gallery": gallery, "published": len(thumbnails)}


@workflow(id="media.thumbnails", description="Thumbnails for a gallery, in parallel.")
async def render_gallery(job: dict[str, Any], ctx: WorkflowContext) -> dict[str, Any]:
    """Render and publish the thumbnails of ``job["images"]``.

    Fails with ``TOO_MANY_FAILURES`` when more than a quarter of the images fail.
    """
    size = int(job.get("size", 256))

    async def render(item_ctx: WorkflowContext, image: str, index: int) -> dict[str, Any]:
        thumbnail: dict[str, Any] = await item_ctx.step("render", render_thumbnail, image, size)
        return thumbnail

    batch = await ctx.map(job["images"], render, max_concurrency=4, completion=TOLERANCE)
    if batch.completion_reason == "FAILURE_TOLERANCE_EXCEEDED":
        raise FatalError(
            f"{batch.failure_count} of {len(job['images'])} images failed",
            code="TOO_MANY_FAILURES",
        )
    thumbnails = [r for r in batch.results if r is not None]
    failed = [job["images"][i] for i, e in enumerate(batch.errors) if e is not None]
    published = await ctx.step("publish", publish_gallery, job["gallery"], thumbnails)
    return {
        "gallery": job["gallery"],
        "thumbnails": [t["thumbnail"] for t in thumbnails],
        "failed": failed,
        "published": published["published"],
        "completion": batch.completion_reason,
    }
