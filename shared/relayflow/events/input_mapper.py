"""The input mapper DSL: projecting a workflow input from an event envelope, and its validator.

Forms: absent (``MISSING``) passes ``data`` through; ``{"passthrough": True}``; ``{"path": ...}``;
``{"object": {key: child}}`` where a child is ``{"lit": v}``, ``{"path": ...}``, a nested mapper
or ``MISSING``. Messages and precedence follow the reference exactly.
"""

from __future__ import annotations

from typing import Any

from relayflow.errors import InputMapperError
from relayflow.events.jsvalue import (
    MISSING,
    has_property,
    is_js_object,
    js_typeof,
    own_entries,
    own_keys,
)
from relayflow.events.paths import ROOTS, resolve_path, root_value
from relayflow.events.predicate import ValidationResult

_ROOTS_TEXT = "data | metadata | name | emittedAt"


# ---- projection ----------------------------------------------------------------------------


def _project(mapper: object, envelope: object) -> Any:
    if mapper is MISSING:
        return root_value(envelope, "data")
    if not is_js_object(mapper):
        raise InputMapperError(
            "input mapper must be undefined, {passthrough}, {path}, or {object}, "
            f"got {js_typeof(mapper)}"
        )
    if has_property(mapper, "passthrough"):
        if mapper["passthrough"] is not True:  # type: ignore[index]
            raise InputMapperError("{ passthrough } must be true")
        return root_value(envelope, "data")
    if has_property(mapper, "path"):
        path = mapper["path"]  # type: ignore[index]
        if not isinstance(path, str) or not path:
            raise InputMapperError("{ path } must be a non-empty string")
        return resolve_path(path, envelope)
    if has_property(mapper, "object"):
        members = mapper["object"]  # type: ignore[index]
        if not is_js_object(members):
            raise InputMapperError("{ object } must map keys to InputMapper | PathOrLit")
        return {key: _project_child(child, envelope) for key, child in own_entries(members)}
    keys = ", ".join(own_keys(mapper))  # type: ignore[arg-type]
    raise InputMapperError(
        f"input mapper must contain one of passthrough | path | object, got keys: {keys}"
    )


def _project_child(child: object, envelope: object) -> Any:
    if child is MISSING:
        return root_value(envelope, "data")
    if not is_js_object(child):
        raise InputMapperError(f"nested mapper entry must be an object, got {js_typeof(child)}")
    if has_property(child, "lit"):
        return child["lit"]  # type: ignore[index]
    if has_property(child, "path"):
        path = child["path"]  # type: ignore[index]
        if not isinstance(path, str) or not path:
            raise InputMapperError("nested { path } must be a non-empty string")
        return resolve_path(path, envelope)
    return _project(child, envelope)


def project_input(mapper: Any, envelope: Any) -> Any:
    """Project a workflow input from an event envelope.

    Missing paths give ``MISSING`` (JavaScript ``undefined``): as an object member it is kept
    here and vanishes from the wire JSON; at the top level it means "no input".

    Args:
        mapper: The filter's ``input`` (``MISSING`` when the filter has none).
        envelope: ``{"name", "data"?, "metadata"?, "emittedAt"}``.

    Returns:
        The projected value (values are shared with the envelope, not copied).

    Raises:
        InputMapperError: The mapper is malformed (``None``, unknown keys, empty path...).
    """
    try:
        return _project(mapper, envelope)
    except RecursionError:
        raise InputMapperError("input mapper is nested too deeply") from None


# ---- static validation ---------------------------------------------------------------------


def _label(path: list[str]) -> str:
    return ".".join(path) if path else "(root)"


def _check_root(text: str, errors: list[str], path: list[str]) -> None:
    # The mapper validator's own root rule: text before the first "." and then before "[".
    root = text.split(".")[0].split("[")[0]
    if root not in ROOTS:
        errors.append(f'{_label(path)}: path root "{root}" is not one of {_ROOTS_TEXT}')


def _walk(mapper: object, errors: list[str], path: list[str]) -> None:
    if mapper is MISSING:
        return
    if not is_js_object(mapper):
        errors.append(
            f"{_label(path)}: input mapper must be undefined or an object, got {js_typeof(mapper)}"
        )
        return
    keys = own_keys(mapper)  # type: ignore[arg-type]
    if not keys:
        errors.append(f"{_label(path)}: input mapper must specify passthrough | path | object")
        return
    if has_property(mapper, "passthrough"):
        if mapper["passthrough"] is not True:  # type: ignore[index]
            errors.append(f"{_label(path)}: {{ passthrough }} must be true")
        return
    if has_property(mapper, "path"):
        text = mapper["path"]  # type: ignore[index]
        if not isinstance(text, str) or not text:
            errors.append(f"{_label(path)}: {{ path }} must be a non-empty string")
            return
        _check_root(text, errors, path)
        return
    if has_property(mapper, "object"):
        members = mapper["object"]  # type: ignore[index]
        if not is_js_object(members):
            errors.append(f"{_label(path)}: {{ object }} must map keys to InputMapper | PathOrLit")
            return
        for key, child in own_entries(members):
            _walk_child(child, errors, [*path, key])
        return
    errors.append(f"{_label(path)}: unknown mapper variant — keys: {', '.join(keys)}")


def _walk_child(child: object, errors: list[str], path: list[str]) -> None:
    if child is MISSING:
        return
    if not is_js_object(child):
        errors.append(f"{_label(path)}: nested entry must be an object")
        return
    if has_property(child, "lit"):
        lit = child["lit"]  # type: ignore[index]
        if lit is not None and js_typeof(lit) not in ("string", "number", "boolean"):
            errors.append(f"{_label(path)}: {{ lit }} must be string | number | boolean | null")
        return
    if has_property(child, "path"):
        text = child["path"]  # type: ignore[index]
        if not isinstance(text, str) or not text:
            errors.append(f"{_label(path)}: {{ path }} must be a non-empty string")
            return
        _check_root(text, errors, path)
        return
    _walk(child, errors, path)


def validate_input_mapper(mapper: Any) -> ValidationResult:
    """Check an input mapper's structure statically (what ``trigger_on`` runs at registration).

    Never raises. Messages carry the dot-joined key trail of the offending entry, or ``(root)``.

    Args:
        mapper: The mapper to check (``MISSING`` is valid: it means "pass data through").

    Returns:
        ``ValidationResult(ok, errors)``.
    """
    errors: list[str] = []
    try:
        _walk(mapper, errors, [])
    except RecursionError:
        errors.append("(root): input mapper is nested too deeply")
    return ValidationResult(ok=not errors, errors=errors)
