"""Per-file check results kept between runs, reused while nothing they came from has changed.

A file's result is a function of:

- its bytes (hashed) and the path it is reported under;
- the engine: smpfix's version, a hash of smpfix's own source files (so an edited rule or a
  development checkout never serves a stale result), Python's and LibCST's versions;
- the effective settings for that file: the codes enabled after its per-file ignores, the
  declared job (command line, ``pyproject.toml``, launchers), the checked roots, and any
  other run option except those that only say what to do with the findings;
- the other files its analysis read (sibling modules the project context resolved). Those
  are not known before the analysis, so an entry records each one with the hash of its bytes
  (or its absence) and is reused only while every one of them is unchanged.

Only *check* results are stored. ``--apply`` and ``--diff`` reuse an entry only when it says
the file has no fix they would apply (then analysis would change nothing); any other file is
analyzed and fixed exactly as without a cache.

On disk: ``<dir>/CACHEDIR.TAG``, ``<dir>/.gitignore`` (so the folder is never committed) and
``<dir>/v1/<slot>.json``, one entry per (path, settings): an edited file replaces its entry
instead of adding one. Entries are written to a temporary file and renamed into place, so a
reader sees a whole old entry or a whole new one; an entry that cannot be read or decoded is
treated as missing and overwritten by the next store. JSON, never pickle, so a planted cache
folder cannot run code; results from it are still only as trustworthy as the folder itself.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from smpfix import __version__
from smpfix.findings import FileResult

CACHE_DIR_NAME = ".smpfix_cache"
FORMAT = "v1"
_MARKERS = {
    "CACHEDIR.TAG": "Signature: 8a477f597d28d172789f06886806bc55\n# This folder is smpfix's result cache (smpfix clean removes it).\n",
    ".gitignore": "# Created by smpfix.\n*\n",
}


def _hash(*parts: bytes) -> str:
    digest = hashlib.blake2b(digest_size=20)
    for part in parts:
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


def file_digest(path: str) -> Optional[str]:
    """The hash of a file's bytes; None when it is missing or unreadable."""
    try:
        with open(path, "rb") as handle:
            return _hash(handle.read())
    except OSError:
        return None


def _libcst_version() -> bytes:
    """LibCST's version, read from its files: importing it would cost what the cache saves."""
    spec = importlib.util.find_spec("libcst")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        try:
            return Path(folder, "_version.py").read_bytes()
        except OSError:
            continue
    return b"unknown"


def engine_fingerprint() -> str:
    """What identifies the code that produces results: versions and smpfix's own sources."""
    package = Path(__file__).resolve().parent
    parts = [FORMAT.encode(), __version__.encode(), sys.version.encode(), _libcst_version()]
    for path in sorted(package.rglob("*.py")):
        parts.append(path.relative_to(package).as_posix().encode())
        parts.append(path.read_bytes())
    return _hash(*parts)


# -- turning settings and results into JSON and back -------------------------------------------


def to_json(value: Any, strict: bool = True) -> Any:
    """A JSON-compatible, order-independent form of dataclasses, enums, mappings and sets.

    Anything else raises ``TypeError``, or with ``strict=False`` (for keys, never for stored
    results) becomes its type and ``repr``: a key that cannot be reproduced only misses.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name), strict) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return to_json(value.value, strict)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(key): to_json(item, strict) for key, item in value.items()}
    if isinstance(value, (frozenset, set)):
        return sorted((to_json(item, strict) for item in value), key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, (tuple, list)):
        return [to_json(item, strict) for item in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if not strict:
        return f"{type(value).__module__}.{type(value).__qualname__}:{value!r}"
    raise TypeError(f"cannot store a {type(value).__name__}")


class _Invalid(Exception):
    """Stored data that does not fit the type it should have: the entry is ignored."""


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_json(kind: Any, data: Any) -> Any:
    """The inverse of :func:`to_json` for a value of type ``kind``; raises ``_Invalid``."""
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if kind is Any:
        return data
    if origin is Union:
        if data is None and type(None) in args:
            return None
        options = [arg for arg in args if arg is not type(None)]
        if len(options) != 1:
            raise _Invalid(f"ambiguous type {kind}")
        return from_json(options[0], data)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        if not isinstance(data, dict):
            raise _Invalid(f"{kind.__name__}: expected an object")
        hints = _hints(kind)
        names = {f.name for f in dataclasses.fields(kind)}
        try:
            return kind(**{name: from_json(hints[name], value) for name, value in data.items() if name in names})
        except TypeError as exc:
            raise _Invalid(str(exc)) from None
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        try:
            return kind(data)
        except ValueError as exc:
            raise _Invalid(str(exc)) from None
    if origin is tuple:
        if not isinstance(data, list):
            raise _Invalid("expected a list")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json(args[0], item) for item in data)
        if len(args) != len(data):
            raise _Invalid("wrong tuple length")
        return tuple(from_json(arg, item) for arg, item in zip(args, data))
    if origin in (frozenset, set):
        if not isinstance(data, list):
            raise _Invalid("expected a list")
        return origin(from_json(args[0], item) for item in data)
    if origin in (Mapping, dict):
        if not isinstance(data, dict):
            raise _Invalid("expected an object")
        return {key: from_json(args[1], value) for key, value in data.items()}
    if kind in (int, float, str, bool):
        if kind is float and isinstance(data, int) and not isinstance(data, bool):
            return float(data)
        if not isinstance(data, kind) or (kind is int and isinstance(data, bool)):
            raise _Invalid(f"expected {kind.__name__}")
        return data
    raise _Invalid(f"unsupported type {kind}")


# -- the cache ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EntryKey:
    """Where one file's entry lives (``slot``) and what it must have been computed from."""

    slot: str
    digest: str


def has_applicable_fix(result: FileResult, unsafe_fixes: bool) -> bool:
    """Whether ``--apply`` (with ``--unsafe-fixes`` or not) would try a fix on this result.

    Asks the fix loop's own test, so the two cannot disagree; results without any fix (the
    common case) are answered without importing it (and LibCST).
    """
    if all(finding.fix is None for finding in result.findings):
        return False
    from smpfix.fixing import eligible

    return any(eligible(finding, unsafe_fixes) for finding in result.findings)


def is_check_result(result: FileResult) -> bool:
    """A result that says what the file is, not what fixing did to it (the only kind stored)."""
    return result.new_text is None and result.original_text is None and result.fixed_count == 0


@dataclass(frozen=True)
class ResultCache:
    """The cache in ``directory`` for results of the engine identified by ``engine``."""

    directory: Path
    engine: str

    @classmethod
    def open(cls, directory: Union[str, os.PathLike[str]]) -> ResultCache:
        return cls(Path(directory), engine_fingerprint())

    @property
    def entries(self) -> Path:
        return self.directory / FORMAT

    def key(self, path: str, raw: bytes, settings: Any) -> Optional[EntryKey]:
        """The entry key for ``path`` with content ``raw`` under ``settings`` (everything
        besides the bytes that decides the result); None when settings cannot be written down."""
        try:
            where = json.dumps([path, os.path.abspath(path), to_json(settings, strict=False)], sort_keys=True).encode()
        except (TypeError, ValueError, RecursionError):
            return None
        slot = _hash(self.engine.encode(), where)
        return EntryKey(slot=slot, digest=_hash(slot.encode(), raw))

    def load(self, key: EntryKey, path: str, raw: bytes) -> Optional[FileResult]:
        """The stored result for ``key``, or None: missing, corrupt, or a dependency changed."""
        try:
            with open(self.entries / f"{key.slot}.json", "rb") as handle:
                entry = json.loads(handle.read())
            if not isinstance(entry, dict) or entry.get("digest") != key.digest:
                return None
            dependencies = entry["dependencies"]
            if not isinstance(dependencies, dict):
                return None
            for dependency, digest in dependencies.items():
                if file_digest(dependency) != digest:
                    return None
            result = from_json(FileResult, entry["result"])
        except (OSError, ValueError, KeyError, TypeError, RecursionError, _Invalid):
            return None
        if not isinstance(result, FileResult) or result.path != path:
            return None
        if entry.get("has_text"):
            from smpfix import source

            try:
                result = dataclasses.replace(result, text=source.decode(path, raw).text)
            except source.SourceError:
                return None
        return result

    def store(self, key: EntryKey, result: FileResult, dependencies: Iterable[str] = ()) -> bool:
        """Keep ``result`` (a check result) for ``key``; False when it could not be written.

        ``dependencies`` are the other files the result was computed from; they are hashed
        now and checked again by :meth:`load`.
        """
        if not is_check_result(result):
            return False
        try:
            entry = {
                "digest": key.digest,
                "dependencies": {path: file_digest(path) for path in sorted(set(dependencies))},
                "has_text": result.text is not None,
                "result": to_json(dataclasses.replace(result, text=None)),
            }
            data = json.dumps(entry, separators=(",", ":")).encode()
        except (TypeError, ValueError):
            return False
        try:
            self._prepare()
            _write_atomic(self.entries / f"{key.slot}.json", data)
        except OSError:
            return False
        return True

    def _prepare(self) -> None:
        self.entries.mkdir(parents=True, exist_ok=True)
        for name, text in _MARKERS.items():
            marker = self.directory / name
            if not marker.exists():
                _write_atomic(marker, text.encode())


def _write_atomic(target: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def clean(directory: Union[str, os.PathLike[str]]) -> int:
    """Remove smpfix's cache files from ``directory``, then the folder if nothing else is left.

    Only files smpfix writes are removed (entries, temporary files, the two markers), so a
    ``--cache-dir`` pointed at the wrong folder loses nothing else. Returns how many entries
    were removed.
    """
    root = Path(directory)
    removed = 0
    if not root.is_dir():
        return 0
    for folder in sorted(root.iterdir()):
        if not (folder.is_dir() and not folder.is_symlink() and folder.name.startswith("v") and folder.name[1:].isdigit()):
            continue
        for entry in folder.iterdir():
            if entry.suffix in (".json", ".tmp") and entry.is_file():
                try:
                    entry.unlink()
                    removed += entry.suffix == ".json"
                except FileNotFoundError:
                    pass
        _remove_if_empty(folder)
    for name, text in _MARKERS.items():
        marker = root / name
        try:
            if marker.is_file() and marker.read_text(encoding="utf-8") == text:
                marker.unlink()
        except (OSError, UnicodeDecodeError):
            pass
    _remove_if_empty(root)
    return removed


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
