"""The web dashboard's static files, shipped inside the package and served by the api function.

No build step: the pages are plain HTML, CSS and JavaScript modules under ``static/``. Each
file is answered with a strong ETag; the module files live under a path holding a digest of
all the files (``dashboard/<digest>/app.js``), so a deployment that changes any of them
changes every URL and browsers may keep them for a year.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

#: The page shell's placeholder for the asset digest.
VERSION_MARK = "{{assets}}"

#: The Content-Security-Policy of every dashboard answer: this origin only, no inline script.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True)
class Asset:
    """One file as it is answered: its bytes as text, content type and ETag."""

    name: str
    text: str
    content_type: str
    etag: str


@dataclass(frozen=True)
class AssetBundle:
    """Every dashboard file, the page shell, and the digest in the assets' path."""

    digest: str
    shell: Asset
    files: dict[str, Asset]

    def get(self, name: str) -> Asset | None:
        """The asset called ``name``, or None."""
        return self.files.get(name)


def _etag(text: str) -> str:
    return '"' + hashlib.sha256(text.encode("utf-8")).hexdigest()[:20] + '"'


@cache
def load_assets() -> AssetBundle:
    """Read ``static/`` once per process."""
    root = resources.files(__package__).joinpath("static")
    texts: dict[str, str] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _TYPES:
            texts[entry.name] = entry.read_text(encoding="utf-8")
    digest = hashlib.sha256()
    for name, text in texts.items():
        digest.update(name.encode() + b"\0" + text.encode("utf-8") + b"\0")
    version = digest.hexdigest()[:12]
    shell_text = texts.pop("index.html").replace(VERSION_MARK, version)
    files = {
        name: Asset(name, text, _TYPES["." + name.rpartition(".")[2]], _etag(text))
        for name, text in texts.items()
    }
    shell = Asset("index.html", shell_text, _TYPES[".html"], _etag(shell_text))
    return AssetBundle(digest=version, shell=shell, files=files)


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` header names ``etag`` (weak or strong, or ``*``)."""
    if not if_none_match:
        return False
    for candidate in if_none_match.split(","):
        tag = candidate.strip()
        if tag == "*" or tag.removeprefix("W/") == etag:
            return True
    return False
