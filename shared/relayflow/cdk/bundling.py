"""Docker-free Lambda bundling: relayflow, its dependencies and your workflow code, built by pip.

The dependencies (relayflow's and the requirements you name) are pip-installed as wheels for
the Lambda platform into a cached folder keyed by a hash of what goes in, so repeated synths
reuse it; relayflow's own files are copied next to them. pip needs those wheels from a package
index, or from a wheelhouse folder on a machine without one. Your workflow folders are copied
on top of that folder into each asset.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

import relayflow

__all__ = [
    "DEFAULT_CACHE_DIR",
    "PROJECT_ROOT",
    "BundleError",
    "LambdaBundle",
    "LocalPipBundling",
    "lambda_code",
    "runtime_requirements",
]

Arch = Literal["arm64", "x86_64"]

_INSTALLED_PACKAGE = Path(relayflow.__file__).resolve().parent


def _checkout_root() -> Path | None:
    # relayflow imported from a source checkout (editable install or `shared/` on sys.path).
    root = _INSTALLED_PACKAGE.parents[1]
    if (root / "pyproject.toml").is_file() and (root / "shared" / "relayflow").is_dir():
        return root
    return None


PROJECT_ROOT = _checkout_root()
"""The relayflow source checkout this module runs from, or `None` for an installed relayflow."""

DEFAULT_CACHE_DIR = (PROJECT_ROOT or Path.cwd()) / "cdk.out" / ".relayflow-bundles"
"""Where built dependency folders are cached (inside cdk.out, which git usually ignores)."""

# Bumped whenever the layout of a bundle changes, so old cached bundles are not reused.
_BUNDLE_FORMAT = "3"
_SKIPPED_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
_SKIPPED_SUFFIXES = (".pyc", ".pyo")
_KEPT_BUNDLES_PER_ARCH = 2
# The construct itself is of no use inside Lambda (and would need CDK there).
_NOT_BUNDLED = ("cdk",)
WHEELHOUSE_ENV = "RELAYFLOW_WHEELHOUSE"


class BundleError(RuntimeError):
    """Raised when the Lambda bundle cannot be built (pip failed, sources missing)."""


def _wheelhouse_from_env() -> Path | None:
    folder = os.environ.get(WHEELHOUSE_ENV)
    return Path(folder) if folder else None


def _pip_platform(architecture: Arch) -> str:
    return "manylinux2014_aarch64" if architecture == "arm64" else "manylinux2014_x86_64"


def _iter_files(base: Path) -> Iterator[Path]:
    if base.is_file():
        yield base
        return
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        for filename in sorted(filenames):
            if not filename.endswith(_SKIPPED_SUFFIXES):
                yield Path(dirpath) / filename


def _ignore_caches(_dir: str, names: list[str]) -> set[str]:
    return {n for n in names if n in _SKIPPED_DIRS or n.endswith(_SKIPPED_SUFFIXES)}


def _hash_tree(digest: hashlib._Hash, label: str, base: Path) -> None:
    for path in _iter_files(base):
        relative = path.relative_to(base).as_posix() if base.is_dir() else base.name
        digest.update(f"{label}/{relative}".encode())
        digest.update(b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())


def runtime_requirements() -> list[str]:
    """The requirements of the installed relayflow distribution, without its extras."""
    try:
        declared = importlib.metadata.requires("relayflow") or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise BundleError(
            "relayflow is neither a source checkout nor an installed distribution; "
            "install it with pip install 'relayflow[cdk]'"
        ) from exc
    return [r for r in declared if "extra" not in r.partition(";")[2]]


@dataclass(frozen=True)
class LambdaBundle:
    """The Lambda code of a deployment: relayflow, its dependencies and your workflow code.

    Attributes:
        workflow_paths: Your workflow code: package folders or single-module files, each
            copied to the top of the bundle under its own name (so `workflow_paths=
            (Path("myapp"),)` lets a step host import `myapp.workflows`).
        requirements: pip requirement specifiers installed next to relayflow (what your
            workflows import, or your workflow package itself when it is published).
        project_root: A relayflow source checkout to build relayflow from; `None` bundles the
            relayflow this process imported (its files, and its dependencies from pip).
        architecture: Lambda architecture the native wheels are chosen for.
        python_version: Python version of the Lambda runtime the wheels must match.
        cache_dir: Folder where built dependency folders are kept between synths.
        wheelhouse: A folder of the Lambda platform's wheels to install from instead of a
            package index (pip runs with `--no-index --find-links`); the environment
            variable `RELAYFLOW_WHEELHOUSE` sets it too. `None` uses pip's own settings
            (`PIP_INDEX_URL`, `PIP_FIND_LINKS`, ...).
    """

    workflow_paths: tuple[Path, ...] = ()
    requirements: tuple[str, ...] = ()
    project_root: Path | None = PROJECT_ROOT
    architecture: Arch = "arm64"
    python_version: str = "3.12"
    cache_dir: Path = field(default=DEFAULT_CACHE_DIR)
    wheelhouse: Path | None = field(default_factory=_wheelhouse_from_env)

    def top_level_names(self) -> set[str]:
        """The importable names `workflow_paths` put at the top of the bundle."""
        return {p.stem if p.is_file() else p.name for p in map(Path, self.workflow_paths)}

    def check(self) -> None:
        """Raise `BundleError` when a workflow path is missing or two share one name."""
        names: list[str] = []
        for path in map(Path, self.workflow_paths):
            if not path.exists():
                raise BundleError(f"workflow path {str(path)!r} does not exist")
            if path.is_file() and path.suffix != ".py":
                raise BundleError(f"workflow path {str(path)!r} is neither a folder nor a .py")
            names.append(path.stem if path.is_file() else path.name)
        clashes = sorted({n for n in names if names.count(n) > 1})
        if clashes:
            raise BundleError(f"two workflow paths are bundled as {', '.join(clashes)}")

    def dependencies_key(self) -> str:
        """The cache key of the dependency folder: relayflow, `requirements`, the platform."""
        digest = hashlib.sha256()
        digest.update(f"{_BUNDLE_FORMAT}|{self.architecture}|{self.python_version}|".encode())
        digest.update("\n".join(self.requirements).encode() + b"\0")
        if self.project_root is not None:
            _hash_tree(digest, "pyproject.toml", self.project_root / "pyproject.toml")
            _hash_tree(digest, "relayflow", self.project_root / "shared" / "relayflow")
        else:
            digest.update("\n".join(runtime_requirements()).encode() + b"\0")
            _hash_tree(digest, "relayflow", _INSTALLED_PACKAGE)
        return f"{self.architecture}-py{self.python_version}-{digest.hexdigest()[:20]}"

    def fingerprint(self) -> str:
        """Return a hash of everything that goes into the bundle (dependencies and workflows)."""
        digest = hashlib.sha256(self.dependencies_key().encode())
        for path in sorted(map(Path, self.workflow_paths)):
            _hash_tree(digest, path.stem if path.is_file() else path.name, path)
        return digest.hexdigest()

    def bundle_dir(self) -> Path:
        """Return the cached dependency folder for the current sources, building it if needed."""
        key = self.dependencies_key()
        target = self.cache_dir / key
        if target.is_dir():
            return target
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with self._lock(key):
            if not target.is_dir():  # another process may have built it while we waited
                self._build(target)
                self._prune(keep=target)
        return target

    def fill(self, output_dir: Path) -> None:
        """Write the whole bundle into `output_dir`: the dependencies, then the workflows."""
        self.check()
        shutil.copytree(
            self.bundle_dir(), output_dir, dirs_exist_ok=True, copy_function=_link_or_copy
        )
        for path in map(Path, self.workflow_paths):
            if path.is_file():
                shutil.copy2(path, output_dir / path.name)
            else:
                shutil.copytree(
                    path, output_dir / path.name, dirs_exist_ok=True, ignore=_ignore_caches
                )

    @contextlib.contextmanager
    def _lock(self, key: str) -> Iterator[None]:
        with (self.cache_dir / f".{key}.lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _build(self, target: Path) -> None:
        package, requirements = self._relayflow_source()
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=self.cache_dir))
        try:
            self._pip_install([*requirements, *self.requirements], staging)
            shutil.copytree(package, staging / "relayflow", ignore=_ignore_caches)
            for name in _NOT_BUNDLED:
                shutil.rmtree(staging / "relayflow" / name, ignore_errors=True)
            # Console scripts are useless in Lambda and carry the build machine's shebang.
            shutil.rmtree(staging / "bin", ignore_errors=True)
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def _relayflow_source(self) -> tuple[Path, list[str]]:
        """relayflow's package folder and its runtime requirements, from a checkout or installed.

        relayflow is copied rather than built by pip, so no build backend is needed.
        """
        if self.project_root is None:
            return _INSTALLED_PACKAGE, runtime_requirements()
        pyproject = self.project_root / "pyproject.toml"
        package = self.project_root / "shared" / "relayflow"
        if not pyproject.is_file() or not package.is_dir():
            raise BundleError(
                f"{self.project_root} does not hold pyproject.toml and shared/relayflow"
            )
        declared = tomllib.loads(pyproject.read_text()).get("project", {}).get("dependencies", [])
        return package, [str(r) for r in declared]

    def _pip_install(self, requirements: list[str], target: Path) -> None:
        platform = _pip_platform(self.architecture)
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            "--disable-pip-version-check",
            "--platform",
            platform,
            "--only-binary=:all:",
            "--python-version",
            self.python_version,
            "--implementation",
            "cp",
            "--target",
            str(target),
        ]
        if self.wheelhouse is not None:
            command += ["--no-index", "--find-links", str(self.wheelhouse)]
        result = subprocess.run(
            [*command, *requirements], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            said = (result.stderr.strip() or result.stdout.strip()).splitlines()
            raise BundleError(self._missing_wheels(requirements, said[-1] if said else ""))

    def _missing_wheels(self, requirements: list[str], pip_said: str) -> str:
        # One line: which wheels, and the two ways to provide them.
        platform = _pip_platform(self.architecture)
        wanted = " ".join(shlex.quote(r) for r in requirements)
        where = (
            f"the wheelhouse {self.wheelhouse} lacks some"
            if self.wheelhouse is not None
            else "pip could not get them from its package index"
        )
        return (
            f"the Lambda bundle needs {platform} wheels for CPython {self.python_version} "
            f"of {wanted} and their dependencies, and {where} (pip: {pip_said}); "
            f"fetch them where an index is reachable with `pip download --only-binary=:all: "
            f"--platform {platform} --python-version {self.python_version} -d wheelhouse "
            f"{wanted}` and pass LambdaBundle(wheelhouse=...) or {WHEELHOUSE_ENV}=wheelhouse, "
            "or point pip at an index that has them (PIP_INDEX_URL, PIP_FIND_LINKS)"
        )

    def _prune(self, keep: Path) -> None:
        prefix = f"{self.architecture}-py{self.python_version}-"
        old = sorted(
            (p for p in self.cache_dir.glob(f"{prefix}*") if p.is_dir() and p != keep),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for path in old[_KEPT_BUNDLES_PER_ARCH - 1 :]:
            shutil.rmtree(path, ignore_errors=True)


def _link_or_copy(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


@jsii.implements(ILocalBundling)
class LocalPipBundling:
    """CDK local bundling that fills the asset folder from a cached `LambdaBundle`."""

    def __init__(self, bundle: LambdaBundle) -> None:
        """Bundle `bundle` into each asset folder CDK asks for."""
        self.bundle = bundle

    def try_bundle(self, output_dir: str, *, image: DockerImage | None = None) -> bool:
        """Copy the bundle into `output_dir` (hard links when possible); never uses Docker."""
        del image  # Docker is never used; the image only satisfies BundlingOptions.
        self.bundle.fill(Path(output_dir))
        return True


def lambda_code(bundle: LambdaBundle, *, build_now: bool = False) -> lambda_.Code:
    """Return Lambda code for `bundle`, built locally when CDK bundles the stack.

    The asset hash is the bundle's source fingerprint, so CDK neither hashes the project folder
    nor rebuilds an asset whose sources did not change. When a synth skips bundling (context
    `aws:cdk:bundling-stacks`), nothing is built.

    Args:
        bundle: What goes into the functions.
        build_now: Build the dependency folder here, so that a `BundleError` reaches the
            app as a Python exception rather than from inside CDK's bundling callback.
    """
    fingerprint = bundle.fingerprint()
    bundle.check()
    if build_now:
        bundle.bundle_dir()
    # The asset folder is only the starting point CDK copies; local bundling replaces it.
    # An empty folder avoids copying a whole project when bundling is skipped.
    source = bundle.cache_dir / "empty-asset-source"
    source.mkdir(parents=True, exist_ok=True)
    return lambda_.Code.from_asset(
        str(source),
        asset_hash=f"{bundle.architecture}-{fingerprint}",
        asset_hash_type=AssetHashType.CUSTOM,
        bundling=BundlingOptions(
            # Required by the API but never pulled: local bundling always succeeds or raises.
            image=DockerImage.from_registry(
                f"public.ecr.aws/sam/build-python{bundle.python_version}"
            ),
            # jsii hands over only the keyword arguments try_bundle declares.
            local=cast(ILocalBundling, LocalPipBundling(bundle)),
        ),
    )
