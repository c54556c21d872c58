"""Every command of the ``relayflow`` parser prints its help and exits 0."""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterator

import pytest

from relayflow.cli import main
from relayflow.cli.app import build_parser


def _command_paths(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _command_paths(child, (*path, name))


COMMANDS = sorted(_command_paths(build_parser()))


def test_the_walk_reaches_every_leaf_command() -> None:
    leaves = {" ".join(p) for p in COMMANDS}
    assert {"trigger", "runs get", "token heartbeat", "manifest show", "dev"} <= leaves
    assert len(COMMANDS) >= 18


@pytest.mark.parametrize("command", COMMANDS, ids=lambda p: " ".join(p) or "relayflow")
def test_help_of_every_command_prints_usage_and_exits_0(command: tuple[str, ...]) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main([*command, "--help"], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    assert out.getvalue().startswith("usage: relayflow"), out.getvalue()
    assert err.getvalue() == ""
