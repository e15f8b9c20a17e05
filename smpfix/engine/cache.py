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
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from smpfix import __version__
from smpfix.base.findings import FileResult
from smpfix.base.safe_read import NOTEBOOK_LIMIT, read_regular

CACHE_DIR_NAME = ".smpfix_cache"
FORMAT = "v1"
_MARKERS = {
    "CACHEDIR.TAG": (
        "Signature: 8a477f597d28d172789f06886806bc55\n"
        "# This folder is smpfix's result cache (smpfix clean removes it).\n"
    ),
    ".gitignore": "# Created by smpfix.\n*\n",
}


def _hash(*parts: bytes) -> str:
    digest = hashlib.blake2b(digest_size=20)
    for part in parts:
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


def file_digest(path: str) -> Optional[str]:
    """The hash of a file's bytes; None when it is missing, unreadable or refused (a FIFO, a
    device or a file over the largest cap: the analysis did not read it either)."""
    try:
        return _hash(read_regular(path, NOTEBOOK_LIMIT))
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
    package = Path(__file__).resolve().parent.parent  # smpfix/
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
        items = [to_json(item, strict) for item in value]
        if all(type(item) is str for item in items):
            return sorted(items)
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, (tuple, list)):
        return [to_json(item, strict) for item in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if not strict:
        return f"{type(value).__module__}.{type(value).__qualname__}:{value!r}"
    raise TypeError(f"cannot store a {type(value).__name__}")


class _Invalid(Exception):
    """Stored data that does not fit the type it should have: the entry is ignored."""


Decoder = Callable[[Any], Any]


def from_json(kind: Any, data: Any) -> Any:
    """The inverse of :func:`to_json` for a value of type ``kind``; raises ``_Invalid``."""
    return decoder(kind)(data)


@functools.cache
def decoder(kind: Any) -> Decoder:
    """A function that checks and decodes JSON data of type ``kind``, built once per type
    (a warm run decodes every cached result, so this path is the cost of a warm run)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:
        return lambda data: data
    if origin is Union:
        options = [arg for arg in args if arg is not type(None)]
        if len(options) > 1 and all(option in _PRIMITIVES for option in options):
            # A job setting's ``Value``: JSON keeps which of bool, int, float or str it was (and
            # a launcher may set a key to ``None``).
            return lambda data: data if data is None or type(data) in options else _invalid(kind)
        if len(options) != 1:
            raise TypeError(f"ambiguous type {kind}")
        inner = decoder(options[0])
        return lambda data: None if data is None and len(args) > 1 else inner(data)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _dataclass_decoder(kind)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return lambda data: _checked(kind, data)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = decoder(args[0])
            return lambda data: tuple(item(value) for value in _list(data))
        items = [decoder(arg) for arg in args]
        return lambda data: tuple(
            decode(value) for decode, value in zip(items, _list(data, len(items)))
        )
    if origin in (frozenset, set):
        item = decoder(args[0])
        return lambda data: origin(item(value) for value in _list(data))
    if origin in (Mapping, dict):
        value_decoder = decoder(args[1])
        return lambda data: {key: value_decoder(value) for key, value in _dict(data).items()}
    if kind in (int, float, str, bool):
        return lambda data: _primitive(kind, data)
    raise TypeError(f"unsupported type {kind}")


_PRIMITIVES = (bool, int, float, str)


def _invalid(kind: Any) -> Any:
    raise _Invalid(f"expected {kind}")


def _dataclass_decoder(kind: type) -> Decoder:
    hints = typing.get_type_hints(kind)
    fields = {f.name: decoder(hints[f.name]) for f in dataclasses.fields(kind)}

    def decode(data: Any) -> Any:
        try:
            return kind(
                **{
                    name: fields[name](value)
                    for name, value in _dict(data).items()
                    if name in fields
                }
            )
        except TypeError as exc:
            raise _Invalid(str(exc)) from None

    return decode


def _checked(kind: type, data: Any) -> Any:
    try:
        return kind(data)
    except (ValueError, TypeError) as exc:
        raise _Invalid(str(exc)) from None


def _list(data: Any, length: Optional[int] = None) -> list[Any]:
    if type(data) is not list or (length is not None and len(data) != length):
        raise _Invalid("expected a list" if length is None else f"expected a list of {length}")
    return data


def _dict(data: Any) -> dict[str, Any]:
    if type(data) is not dict:
        raise _Invalid("expected an object")
    return data


def _primitive(kind: type, data: Any) -> Any:
    if type(data) is kind:
        return data
    if kind is float and type(data) is int:
        return float(data)
    raise _Invalid(f"expected {kind.__name__}")


# -- the cache ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EntryKey:
    """Where one file's entry lives (``slot``) and what it must have been computed from."""

    slot: str
    digest: str


def has_applicable_fix(result: FileResult, unsafe_fixes: bool, hints: bool = True) -> bool:
    """Whether ``--apply`` (with ``--unsafe-fixes`` or not) would try a fix on this result.

    Asks the fix loop's own test, so the two cannot disagree; results without any fix (the
    common case) are answered without importing it (and LibCST).
    """
    if all(finding.fix is None for finding in result.findings):
        return False
    from smpfix.engine.fixing import eligible

    return any(eligible(finding, unsafe_fixes, hints) for finding in result.findings)


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
            where = json.dumps(
                [path, os.path.abspath(path), to_json(settings, strict=False)], sort_keys=True
            ).encode()
        except (TypeError, ValueError, RecursionError):
            return None
        slot = _hash(self.engine.encode(), where)
        return EntryKey(slot=slot, digest=_hash(slot.encode(), raw))

    def load(
        self,
        key: EntryKey,
        path: str,
        raw: bytes,
        digests: Optional[dict[str, Optional[str]]] = None,
    ) -> Optional[FileResult]:
        """The stored result for ``key``, or None: missing, corrupt, or a dependency changed.

        ``digests`` remembers dependency hashes across the files of one run (scripts in one
        folder look for the same sibling modules).
        """
        entry = self._entry(key, digests)
        if entry is None:
            return None
        try:
            result = from_json(FileResult, entry["result"])
        except (KeyError, TypeError, ValueError, RecursionError, _Invalid):
            return None
        if not isinstance(result, FileResult) or result.path != path:
            return None
        if entry.get("has_text"):
            from smpfix.base import source

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
        return self._write(
            key,
            dataclasses.replace(result, text=None),
            dependencies,
            has_text=result.text is not None,
        )

    def load_value(
        self, key: EntryKey, kind: Any, digests: Optional[dict[str, Optional[str]]] = None
    ) -> Optional[Any]:
        """Another kind of stored value (the launcher index keeps what each launcher says):
        the value of type ``kind`` stored for ``key``, or None, as :meth:`load`."""
        entry = self._entry(key, digests)
        if entry is None:
            return None
        try:
            return from_json(kind, entry["result"])
        except (KeyError, TypeError, ValueError, RecursionError, _Invalid):
            return None

    def store_value(self, key: EntryKey, value: Any, dependencies: Iterable[str] = ()) -> bool:
        """Keep ``value`` (dataclasses, tuples, mappings of plain values) for ``key``."""
        return self._write(key, value, dependencies, has_text=False)

    def _entry(
        self, key: EntryKey, digests: Optional[dict[str, Optional[str]]]
    ) -> Optional[dict[str, Any]]:
        """The entry for ``key`` while its dependencies are unchanged, else None."""
        known = digests if digests is not None else {}
        try:
            with open(self.entries / f"{key.slot}.json", "rb") as handle:
                entry = json.loads(handle.read())
            if not isinstance(entry, dict) or entry.get("digest") != key.digest:
                return None
            dependencies = entry["dependencies"]
            if not isinstance(dependencies, dict):
                return None
            for dependency, digest in dependencies.items():
                current = (
                    known[dependency]
                    if dependency in known
                    else known.setdefault(dependency, file_digest(dependency))
                )
                if current != digest:
                    return None
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None
        return entry

    def _write(
        self, key: EntryKey, value: Any, dependencies: Iterable[str], has_text: bool
    ) -> bool:
        try:
            entry = {
                "digest": key.digest,
                "dependencies": {path: file_digest(path) for path in sorted(set(dependencies))},
                "has_text": has_text,
                "result": to_json(value),
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
    from smpfix.base.source import write_bytes_atomic

    write_bytes_atomic(target, data, prefix=".")


def clean(directory: Union[str, os.PathLike[str]]) -> int:
    """Remove smpfix's cache files from ``directory``, then the folder if nothing else is left.

    Only files smpfix writes are removed (entries, temporary files, the two markers), so a
    ``--cache-dir`` pointed at the wrong folder loses nothing else. Another run may be
    cleaning or writing at the same time: whatever vanishes meanwhile is simply skipped.
    Returns how many entries were removed.
    """
    root = Path(directory)
    removed = 0
    if not root.is_dir():
        return 0
    for folder in _listing(root):
        if not (
            folder.is_dir()
            and not folder.is_symlink()
            and folder.name.startswith("v")
            and folder.name[1:].isdigit()
        ):
            continue
        for entry in _listing(folder):
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


def _listing(folder: Path) -> list[Path]:
    """A folder's entries; none when another run (a concurrent ``clean``) removed it meanwhile."""
    try:
        return sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
