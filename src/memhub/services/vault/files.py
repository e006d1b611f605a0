"""Reading notes and writing them atomically, without losing an edit made outside memhub.

A write goes to a temporary file in the note's folder, is flushed and fsynced, and then
renamed over the note (`os.replace`), or linked into place for a new note (`os.link`
fails if the name was taken meanwhile), and the folder is fsynced: after a crash the
note is either the old or the new version, never half of each. Just before the rename the
note's mtime, size and SHA-256 are compared with what the write was based on; a
difference means someone (Obsidian, an editor, git) changed it meanwhile, and the write
stops with `conflict` instead of overwriting their edit.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from memhub.core.errors import ErrorKind, MemhubError, conflict, invalid
from memhub.services.vault.config import MAX_READ_BYTES
from memhub.services.vault.notes import decode
from memhub.services.vault.paths import TEMP_MARK


@dataclass(frozen=True, slots=True)
class Snapshot:
    mtime_ns: int
    size: int
    sha256: str


def _io_error(exc: OSError) -> MemhubError:
    return MemhubError(
        ErrorKind.UNAVAILABLE, f"the vault could not be written ({exc.strerror or 'I/O error'})"
    )


def read_bytes(path: Path) -> tuple[bytes, Snapshot]:
    st = path.stat()
    if st.st_size > MAX_READ_BYTES:
        raise invalid(f"the file is larger than {MAX_READ_BYTES // (1024 * 1024)} MiB")
    data = path.read_bytes()
    return data, Snapshot(st.st_mtime_ns, len(data), hashlib.sha256(data).hexdigest())


def read_text(path: Path) -> tuple[str, Snapshot]:
    data, snap = read_bytes(path)
    text = decode(data)
    if text is None:
        raise invalid("the file is not UTF-8 text")
    return text, snap


def snapshot(path: Path) -> Snapshot | None:
    try:
        st = path.stat()
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return Snapshot(st.st_mtime_ns, len(data), hashlib.sha256(data).hexdigest())


def _fsync(fd: int) -> None:
    os.fsync(fd)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        _fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, base: Snapshot | None) -> Snapshot:
    """Write `data` to `path` atomically. `base=None`: create (conflict if it exists);
    otherwise replace, if the note still is what `base` describes (conflict if not)."""
    folder = path.parent
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name[:60]}{TEMP_MARK}", dir=folder)
    except OSError as exc:
        raise _io_error(exc) from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            _fsync(handle.fileno())
        mode = 0o644 if base is None else (path.stat().st_mode & 0o777)
        os.chmod(tmp, mode)
        if base is None:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise conflict(f"{path.name} already exists") from None
        else:
            if snapshot(path) != base:
                raise conflict("the note was changed outside memhub while this write ran; read it again")
            os.replace(tmp, path)
        _fsync_dir(folder)
    except OSError as exc:
        raise _io_error(exc) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    st = path.stat()
    return Snapshot(st.st_mtime_ns, len(data), hashlib.sha256(data).hexdigest())
