"""Docker-free Lambda bundling: pip installs relayflow for the Lambda platform into a cached folder.

The folder is keyed by a hash of the sources, so repeated synths reuse it instead of re-running pip.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

__all__ = [
    "DEFAULT_CACHE_DIR",
    "PROJECT_ROOT",
    "BundleError",
    "LambdaBundle",
    "LocalPipBundling",
    "lambda_code",
]

Arch = Literal["arm64", "x86_64"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]
"""The repository root: where pyproject.toml, shared/, functions/ and examples/ live."""

DEFAULT_CACHE_DIR = PROJECT_ROOT / "cdk.out" / ".relayflow-bundles"
"""Where built bundles are cached (inside cdk.out, which is already ignored by git)."""

# Bumped whenever the layout of a bundle changes, so old cached bundles are not reused.
_BUNDLE_FORMAT = "1"
_SOURCE_DIRS = ("shared/relayflow", "functions", "examples")
_HASHED_FILES = ("pyproject.toml",)
_SKIPPED_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
_SKIPPED_SUFFIXES = (".pyc", ".pyo")
_KEPT_BUNDLES_PER_ARCH = 2


class BundleError(RuntimeError):
    """Raised when the Lambda bundle cannot be built (pip failed, sources missing)."""


def _pip_platform(architecture: Arch) -> str:
    return "manylinux2014_aarch64" if architecture == "arm64" else "manylinux2014_x86_64"


def _iter_source_files(root: Path) -> Iterator[Path]:
    for name in _HASHED_FILES:
        path = root / name
        if path.is_file():
            yield path
    for folder in _SOURCE_DIRS:
        base = root / folder
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
            for filename in sorted(filenames):
                if not filename.endswith(_SKIPPED_SUFFIXES):
                    yield Path(dirpath) / filename


def _ignore_caches(_dir: str, names: list[str]) -> set[str]:
    return {n for n in names if n in _SKIPPED_DIRS or n.endswith(_SKIPPED_SUFFIXES)}


@dataclass(frozen=True)
class LambdaBundle:
    """One bundle of Lambda code: relayflow, its dependencies, handlers and example workflows.

    Attributes:
        project_root: Repository root holding pyproject.toml, shared/, functions/, examples/.
        architecture: Lambda architecture the native wheels are chosen for.
        python_version: Python version of the Lambda runtime the wheels must match.
        cache_dir: Folder where built bundles are kept between synths.
    """

    project_root: Path = PROJECT_ROOT
    architecture: Arch = "arm64"
    python_version: str = "3.12"
    cache_dir: Path = DEFAULT_CACHE_DIR

    def fingerprint(self) -> str:
        """Return a hash of everything that goes into the bundle (sources, pyproject, platform)."""
        digest = hashlib.sha256()
        digest.update(f"{_BUNDLE_FORMAT}|{self.architecture}|{self.python_version}|".encode())
        for path in _iter_source_files(self.project_root):
            digest.update(path.relative_to(self.project_root).as_posix().encode())
            digest.update(b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        return digest.hexdigest()

    def bundle_dir(self) -> Path:
        """Return the cached bundle folder for the current sources, building it if needed."""
        key = f"{self.architecture}-py{self.python_version}-{self.fingerprint()[:20]}"
        target = self.cache_dir / key
        if target.is_dir():
            return target
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with self._lock(key):
            if not target.is_dir():  # another process may have built it while we waited
                self._build(target)
                self._prune(keep=target)
        return target

    @contextlib.contextmanager
    def _lock(self, key: str) -> Iterator[None]:
        with (self.cache_dir / f".{key}.lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _build(self, target: Path) -> None:
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=self.cache_dir))
        try:
            with tempfile.TemporaryDirectory(prefix="relayflow-project-") as project_copy:
                self._copy_project(Path(project_copy))
                self._pip_install(Path(project_copy), staging)
            for folder in ("functions", "examples"):
                source = self.project_root / folder
                if source.is_dir():
                    shutil.copytree(source, staging / folder, ignore=_ignore_caches)
            # Console scripts are useless in Lambda and carry the build machine's shebang.
            shutil.rmtree(staging / "bin", ignore_errors=True)
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def _copy_project(self, destination: Path) -> None:
        # Building from a copy keeps pip's build artefacts out of the working tree.
        pyproject = self.project_root / "pyproject.toml"
        package = self.project_root / "shared" / "relayflow"
        if not pyproject.is_file() or not package.is_dir():
            raise BundleError(
                f"{self.project_root} does not hold pyproject.toml and shared/relayflow"
            )
        shutil.copy2(pyproject, destination / "pyproject.toml")
        readme = self.project_root / "README.md"
        if readme.is_file():
            shutil.copy2(readme, destination / "README.md")
        else:
            (destination / "README.md").write_text("relayflow\n")
        shutil.copytree(package, destination / "shared" / "relayflow", ignore=_ignore_caches)

    def _pip_install(self, project: Path, target: Path) -> None:
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            "--disable-pip-version-check",
            "--platform",
            _pip_platform(self.architecture),
            "--only-binary=:all:",
            "--python-version",
            self.python_version,
            "--implementation",
            "cp",
            "--target",
            str(target),
            str(project),
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BundleError(
                f"pip could not install relayflow for {_pip_platform(self.architecture)}:\n"
                f"{result.stderr.strip() or result.stdout.strip()}"
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
        shutil.copytree(
            self.bundle.bundle_dir(),
            output_dir,
            dirs_exist_ok=True,
            copy_function=_link_or_copy,
        )
        return True


def lambda_code(bundle: LambdaBundle) -> lambda_.Code:
    """Return Lambda code for `bundle`, built locally when CDK bundles the stack.

    The asset hash is the bundle's source fingerprint, so CDK neither hashes the project folder
    nor rebuilds an asset whose sources did not change. When a synth skips bundling (context
    `aws:cdk:bundling-stacks`), nothing is built.
    """
    fingerprint = bundle.fingerprint()
    return lambda_.Code.from_asset(
        str(bundle.project_root),
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
