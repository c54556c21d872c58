"""Each setting is declared once; its variable list, reading and docs table derive from that."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from relayflow import config
from relayflow.config import Settings, settings_table
from relayflow.settings.declare import TABLE_END, TABLE_START, marked_table, specs

DOCS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "settings.md"


def test_the_docs_page_holds_the_table_rendered_from_the_declarations() -> None:
    published = marked_table(DOCS_PAGE.read_text(encoding="utf-8"))
    assert published == settings_table(), (
        "docs/reference/settings.md is out of date: run "
        "`python -m relayflow.settings --write-docs docs/reference/settings.md`"
    )


def test_every_field_is_a_declared_setting_with_its_own_variable() -> None:
    declared = specs(Settings)
    assert set(declared) == {field.name for field in dataclasses.fields(Settings)}
    variables = [row.name for spec in declared.values() for row in spec.rows()]
    assert len(variables) == len(set(variables))
    assert tuple(variables) == config.ALL_ENV_NAMES
    assert all(name.startswith("RELAYFLOW_") for name in variables)


def test_the_table_lists_every_variable_once_with_its_meaning() -> None:
    rows = [line for line in settings_table().splitlines()[2:]]
    names = [row.split("|")[1].strip().strip("`") for row in rows]
    assert names == [*config.ALL_ENV_NAMES, config.ENV_WORKFLOW_MODULES]
    assert all(row.split("|")[3].strip() for row in rows)


def test_the_env_constants_are_the_declared_variable_names() -> None:
    assert config.ENV_TABLE_NAME == "RELAYFLOW_TABLE_NAME"
    assert config.ENV_DISPATCH_CONNECT_TIMEOUT == "RELAYFLOW_DISPATCH_CONNECT_TIMEOUT"
    assert config.ENV_DISPATCH_FUNCTION == "RELAYFLOW_DISPATCH_FUNCTION"
    assert config.ENV_WORKFLOW_MODULES == "RELAYFLOW_WORKFLOW_MODULES"
    from relayflow.config import ENV_OVERRUN_GRACE_MAX

    assert ENV_OVERRUN_GRACE_MAX == "RELAYFLOW_OVERRUN_GRACE_MAX"
    with pytest.raises(AttributeError, match="ENV_NO_SUCH_THING"):
        _ = config.ENV_NO_SUCH_THING


#: Settings whose table default is a value the variable could be set to (not "—" or prose).
VALUED = sorted(
    name
    for name, spec in specs(Settings).items()
    if spec.shown.startswith("`") and spec.shown.endswith("`") and spec.shown.count("`") == 2
)


def test_most_settings_show_a_default_the_variable_could_take() -> None:
    assert len(VALUED) >= 25


@pytest.mark.parametrize("field", VALUED)
def test_a_default_shown_in_the_table_reads_back_as_the_default(field: str) -> None:
    spec = specs(Settings)[field]
    default = getattr(Settings(), field)
    assert getattr(Settings.from_env({spec.variable: spec.shown.strip("`")}), field) == default


def test_write_docs_rewrites_only_the_marked_table(tmp_path: Path) -> None:
    page = tmp_path / "settings.md"
    page.write_text(f"# Settings\n\nIntro.\n\n{TABLE_START}\n| old |\n{TABLE_END}\n\nAfter.\n")
    assert config.main(["--write-docs", str(page)]) == 0
    written = page.read_text()
    assert written.startswith("# Settings\n\nIntro.\n\n")
    assert written.endswith(f"{TABLE_END}\n\nAfter.\n")
    assert marked_table(written) == settings_table()
    assert "| old |" not in written
    config.main(["--write-docs", str(page)])
    assert page.read_text() == written


def test_a_page_without_markers_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "settings.md"
    page.write_text("# Settings\n")
    with pytest.raises(ValueError, match="settings-table"):
        config.main(["--write-docs", str(page)])
