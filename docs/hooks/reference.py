"""MkDocs hook: the reference pages are rendered from the code at build time.

A page holds a marker such as ``<!-- reference: cli -->``; this hook replaces it with what the
code says now: the CLI from its argument parser, the HTTP API from the OpenAPI document the
API serves. Nothing in these pages is copied by hand.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from mkdocs.structure.files import File, Files

MARKER = re.compile(r"<!-- reference: ([a-z-]+) -->")


def cli_reference() -> str:
    """Every command of ``relayflow``, with the help its parser prints."""
    from relayflow.cli.app import build_parser

    sections = []
    for path, parser in _commands(build_parser(), ["relayflow"]):
        usage = parser.format_help().rstrip()
        sections.append(f"### `{' '.join(path)}`\n\n```text\n{usage}\n```\n")
    return "\n".join(sections)


def _commands(
    parser: argparse.ArgumentParser, path: list[str]
) -> Iterator[tuple[list[str], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:  # argparse offers no public walk of its sub-commands
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, [*path, name])


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document the API serves at ``GET /api/openapi.json``."""
    from relayflow.api.app import create_app
    from relayflow.api.auth import StaticTokenAuth
    from relayflow.testing import WorkflowTestEnv

    env = WorkflowTestEnv()
    app = create_app(env.driver, env.admin, auth=StaticTokenAuth(["docs"]))
    document: dict[str, Any] = app.openapi_document()
    return document


def http_api_reference() -> str:
    """The routes, parameters and models of the OpenAPI document, as Markdown."""
    from openapidocs.mk.v3 import OpenAPIV3DocumentationHandler  # from neoteroi-mkdocs

    handler = OpenAPIV3DocumentationHandler(openapi_document(), style="MKDOCS")
    rendered: str = handler.write()
    return rendered


RENDERERS: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "http-api": http_api_reference,
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace each reference marker with what the code renders for it."""
    return MARKER.sub(lambda match: RENDERERS[match.group(1)](), markdown)


def on_files(files: Files, config: Any, **_: Any) -> Files:
    """Publish the OpenAPI document with the site, for tools that read it."""
    content = json.dumps(openapi_document(), indent=2)
    files.append(File.generated(config, "reference/openapi.json", content=content))
    return files
