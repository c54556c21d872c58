"""Docker-free bundling: the Lambda asset holds relayflow, native wheels and the workflows."""

from __future__ import annotations

import base64
import functools
import hashlib
import shutil
import socket
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from aws_cdk.assertions import Template
from infra_asserts import ROOT, functions_by_handler

import infra.app
import infra.stack
from infra.app import build_app
from relayflow.cdk.bundling import (
    WHEELHOUSE_ENV,
    BundleError,
    LambdaBundle,
    runtime_requirements,
)


@pytest.fixture(scope="module")
def asset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The arm64 asset of the sample app, bundled for real (pip, no Docker)."""
    outdir = tmp_path_factory.mktemp("bundled-out")
    _, stack = build_app({}, outdir=str(outdir), nag=False)
    template = Template.from_stack(stack)
    keys = {f["Code"]["S3Key"] for f in functions_by_handler(template).values()}
    assert len(keys) == 1, "the four functions share one asset"
    (key,) = keys
    asset = outdir / f"asset.{key.removesuffix('.zip')}"
    assert asset.is_dir()
    return asset


@pytest.mark.slow
def test_asset_holds_the_package_handlers_and_examples(asset_dir: Path) -> None:
    for path in (
        "relayflow/__init__.py",
        "relayflow/py.typed",
        "relayflow/entrypoints/api.py",
        "relayflow/worker/hosts.py",
        "functions/api/handler.py",
        "functions/worker/handler.py",
        "relayflow/dashboard/static/index.html",
        "relayflow/dashboard/static/app.js",
        "examples/__init__.py",
        "aws_lambda_powertools/__init__.py",
    ):
        assert (asset_dir / path).is_file(), path
    assert not (asset_dir / "relayflow" / "cdk").exists(), "the construct is not deployed"
    assert not (asset_dir / "bin").exists()
    assert not list(asset_dir.rglob("__pycache__"))


@pytest.mark.slow
def test_asset_carries_pydantic_core_built_for_lambda_arm64(asset_dir: Path) -> None:
    (native,) = (asset_dir / "pydantic_core").glob("_pydantic_core*.so")
    assert native.name == "_pydantic_core.cpython-312-aarch64-linux-gnu.so"
    (wheel,) = asset_dir.glob("pydantic_core-*.dist-info/WHEEL")
    tags = [line.split(": ", 1)[1] for line in wheel.read_text().splitlines() if "Tag:" in line]
    assert tags and all(t.startswith("cp312-cp312-manylinux") for t in tags)
    assert all(t.endswith("aarch64") for t in tags)


def _tiny_project(root: Path) -> Path:
    (root / "shared" / "relayflow").mkdir(parents=True)
    (root / "shared" / "relayflow" / "__init__.py").write_text("VERSION = 1\n")
    (root / "myflows").mkdir(parents=True)
    (root / "myflows" / "__init__.py").write_text("FLOWS = 1\n")
    (root / "pyproject.toml").write_text("[project]\nname = 'tiny'\n")
    return root


@pytest.mark.parametrize(
    ("change", "changes_fingerprint"),
    [
        ("shared/relayflow/__init__.py", True),
        ("myflows/__init__.py", True),
        ("myflows/orders.py", True),
        ("pyproject.toml", True),
        ("shared/relayflow/__pycache__/x.cpython-311.pyc", False),
        ("myflows/__pycache__/x.cpython-311.pyc", False),
        ("README.md", False),
    ],
)
def test_fingerprint_follows_the_sources_only(
    tmp_path: Path, change: str, changes_fingerprint: bool
) -> None:
    root = _tiny_project(tmp_path)
    bundle = LambdaBundle(
        workflow_paths=(root / "myflows",), project_root=root, cache_dir=tmp_path / "cache"
    )
    before = bundle.fingerprint()
    target = tmp_path / change
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text((target.read_text() if target.exists() else "") + "# changed\n")
    assert (bundle.fingerprint() != before) is changes_fingerprint


def test_fingerprint_depends_on_the_architecture(tmp_path: Path) -> None:
    root = _tiny_project(tmp_path)
    arm = LambdaBundle(project_root=root, architecture="arm64", cache_dir=tmp_path / "c")
    x86 = LambdaBundle(project_root=root, architecture="x86_64", cache_dir=tmp_path / "c")
    assert arm.fingerprint() != x86.fingerprint()


def test_workflow_code_does_not_change_the_cached_dependencies(tmp_path: Path) -> None:
    root = _tiny_project(tmp_path)
    bare = LambdaBundle(project_root=root, cache_dir=tmp_path / "cache")
    with_flows = replace(bare, workflow_paths=(root / "myflows",))
    assert with_flows.dependencies_key() == bare.dependencies_key()
    assert with_flows.fingerprint() != bare.fingerprint()
    assert replace(bare, requirements=("attrs==23.2.0",)).dependencies_key() != (
        bare.dependencies_key()
    )


def test_a_cached_bundle_is_reused_without_running_pip(tmp_path: Path) -> None:
    bundle = LambdaBundle(project_root=_tiny_project(tmp_path), cache_dir=tmp_path / "cache")
    key = bundle.dependencies_key()
    assert key.startswith("arm64-py3.12-")
    cached = tmp_path / "cache" / key
    cached.mkdir(parents=True)
    (cached / "marker").write_text("built earlier")
    assert bundle.bundle_dir() == cached


def test_a_project_without_the_package_fails_clearly(tmp_path: Path) -> None:
    root = _tiny_project(tmp_path)
    shutil.rmtree(root / "shared")
    bundle = LambdaBundle(project_root=root, cache_dir=tmp_path / "cache")
    with pytest.raises(BundleError, match="shared/relayflow"):
        bundle.bundle_dir()
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")] == []


def test_default_bundle_builds_from_this_repository() -> None:
    assert LambdaBundle().project_root == ROOT
    assert LambdaBundle().cache_dir == ROOT / "cdk.out" / ".relayflow-bundles"


def test_an_installed_relayflow_bundles_its_runtime_requirements_only() -> None:
    requirements = runtime_requirements()
    names = {r.split(">")[0].split("<")[0].split("=")[0].strip() for r in requirements}
    assert {"pydantic", "aws-lambda-powertools", "boto3"} <= names
    assert not names & {"pytest", "aws-cdk-lib", "moto"}


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        (("missing",), "does not exist"),
        (("notes.txt",), "neither a folder nor a .py"),
        (("a/myflows", "b/myflows"), "two workflow paths are bundled as myflows"),
    ],
)
def test_bad_workflow_paths_are_refused(
    tmp_path: Path, paths: tuple[str, ...], message: str
) -> None:
    (tmp_path / "notes.txt").write_text("x")
    for folder in ("a/myflows", "b/myflows"):
        (tmp_path / folder).mkdir(parents=True)
    bundle = LambdaBundle(workflow_paths=tuple(tmp_path / p for p in paths))
    with pytest.raises(BundleError, match=message):
        bundle.check()


def _closed_index() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/simple"


@pytest.fixture
def no_package_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip as on a machine that reaches no package index."""
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", WHEELHOUSE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", _closed_index())
    monkeypatch.setenv("PIP_NO_INDEX", "1")


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A pure-Python wheel made by hand (pip installs it for any platform)."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def _project_needing(root: Path, requirement: str) -> Path:
    root = _tiny_project(root)
    (root / "pyproject.toml").write_text(
        f"[project]\nname = 'tiny'\ndependencies = [{requirement!r}]\n"
    )
    return root


@pytest.mark.usefixtures("no_package_index")
def test_without_an_index_the_bundle_says_in_one_line_which_wheels_it_needs(
    tmp_path: Path,
) -> None:
    root = _project_needing(tmp_path, "tinydep>=1,<2")
    bundle = LambdaBundle(project_root=root, cache_dir=tmp_path / "cache", wheelhouse=None)
    with pytest.raises(BundleError) as caught:
        bundle.bundle_dir()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "the Lambda bundle needs manylinux2014_aarch64 wheels for CPython 3.12 of "
        "'tinydep>=1,<2' and their dependencies, and pip could not get them from its package "
        "index (pip: ERROR: "
    )
    assert "pip download --only-binary=:all: --platform manylinux2014_aarch64" in message
    assert "LambdaBundle(wheelhouse=...) or RELAYFLOW_WHEELHOUSE=wheelhouse" in message
    assert message.endswith("(PIP_INDEX_URL, PIP_FIND_LINKS)")
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")] == []


@pytest.mark.usefixtures("no_package_index")
def test_a_wheelhouse_bundles_without_an_index(tmp_path: Path) -> None:
    root = _project_needing(tmp_path, "tinydep>=1,<2")
    _wheel(tmp_path / "wheelhouse", "tinydep", "1.4")
    bundle = LambdaBundle(
        project_root=root, cache_dir=tmp_path / "cache", wheelhouse=tmp_path / "wheelhouse"
    )
    built = bundle.bundle_dir()
    assert (built / "tinydep" / "__init__.py").read_text() == "VERSION = '1.4'\n"
    assert (built / "relayflow" / "__init__.py").read_text() == "VERSION = 1\n"


@pytest.mark.usefixtures("no_package_index")
def test_the_wheelhouse_comes_from_the_environment_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project_needing(tmp_path, "tinydep==1.0")
    _wheel(tmp_path / "wheelhouse", "other", "1.0")
    monkeypatch.setenv(WHEELHOUSE_ENV, str(tmp_path / "wheelhouse"))
    bundle = LambdaBundle(project_root=root, cache_dir=tmp_path / "cache")
    assert bundle.wheelhouse == tmp_path / "wheelhouse"
    with pytest.raises(BundleError, match=r"and the wheelhouse .*wheelhouse lacks some \(pip: "):
        bundle.bundle_dir()


@pytest.mark.slow
@pytest.mark.usefixtures("no_package_index")
def test_a_cold_synth_without_an_index_ends_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path / "out"))
    monkeypatch.setattr(
        infra.stack, "LambdaBundle", functools.partial(LambdaBundle, cache_dir=tmp_path / "c")
    )
    with pytest.raises(SystemExit) as caught:
        infra.app.main(["-c", "stage=dev"])
    message = str(caught.value.code)
    assert "\n" not in message
    assert message.startswith("relayflow: the Lambda bundle needs manylinux2014_aarch64 wheels")
