"""Reading notes and writing them atomically, without losing an edit made outside memhub.

A write goes to a temporary file in the note's folder, is flushed and fsynced, and then
renamed over the note (`os.replace`), or linked into place for a new note (`os.link`
fails if the name was taken meanwhile), and the folder is fsynced: after a crash the
note is either the old or the new version, never half of each. Just before the rename the
note's mtime, size and SHA-256 are compared with what the write was based on; a
difference means someone (Obsidian, an editor, git) changed it meanwhile, and the write
stops with `conflict` instead of overwriting their edit.

memhub's own writers, in this process and in any other serving the same vault, take turns:
a write reads, checks and renames while holding `vault_lock`, an exclusive `flock` on the
vault's root folder (no lock file to show up in the vault, in Obsidian or in git). Two
processes appending to one note therefore never drop each other's entry.

Where a folder cannot be locked (NFS: Linux emulates `flock` there with POSIX record locks,
which need a file open for writing, so locking a folder fails), or when `lock_mode` is
"file" (replicas on several machines sharing the vault), the lock is a POSIX record lock
(`lockf`) on `.memhub-lock` in the vault's root instead: a hidden file, which memhub's
listings and Obsidian skip. NFS needs lock support for it (NFSv4, or NFSv3 with lockd; not
the `nolock` mount option, which makes every lock local to one machine). A temporary file
exists only while its writer holds that lock; one found while holding it was left by a
writer that was killed, and `sweep_temp_files` deletes it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memhub.core.errors import ErrorKind, MemhubError, conflict, invalid
from memhub.services.vault.config import LOCK_WAIT_S, MAX_READ_BYTES
from memhub.services.vault.notes import decode
from memhub.services.vault.paths import TEMP_MARK

LOCK_FILE = ".memhub-lock"  # the lock of lock mode "file" (and of "auto" where a folder cannot be locked)
LOCK_MODES = ("auto", "folder", "file")
# what flock on a folder fails with where the filesystem cannot lock one (NFS: EBADF)
_UNLOCKABLE = (errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)

# the names `atomic_write` gives its temporary files: "." + note name + TEMP_MARK + mkstemp's 8
_TEMP_NAME = re.compile(r"^\..{0,60}" + re.escape(TEMP_MARK) + r"[a-z0-9_]{8}$", re.DOTALL)


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


@contextlib.contextmanager
def vault_lock(root: Path, wait_s: float = LOCK_WAIT_S, mode: str = "auto") -> Iterator[None]:
    """Hold the vault's cross-process write lock: an exclusive `flock` on its root folder
    (mode "folder"), a `lockf` on its `.memhub-lock` file (mode "file"), or the folder's where
    the filesystem can lock a folder and the file's where it cannot ("auto").

    Waits at most `wait_s` for another process's write, then `unavailable`: a writer never
    holds the lock for longer than one note's read, write and rename. A process must not
    take it twice at once (VaultState.writing orders its own threads first): a POSIX record
    lock does not exclude another thread of the process holding it."""
    if mode not in LOCK_MODES:
        raise ValueError(f"vault lock mode {mode!r}; expected one of {', '.join(LOCK_MODES)}")
    deadline = time.monotonic() + wait_s
    if mode != "file":
        try:
            root.mkdir(parents=True, exist_ok=True)
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise _io_error(exc) from None
        try:
            _lock(fd, deadline, folder=True, fallback=mode == "auto")
        except _FolderUnlockable:
            os.close(fd)
        except BaseException:
            os.close(fd)
            raise
        else:
            try:
                yield
            finally:
                os.close(fd)  # closing the descriptor releases the lock
            return
    try:
        fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise _io_error(exc) from None
    try:
        _lock(fd, deadline, folder=False)
        yield
    finally:
        os.close(fd)  # releases the record lock


class _FolderUnlockable(Exception):
    """The filesystem cannot lock a folder (lock mode "auto" then locks the file)."""


def _lock(fd: int, deadline: float, *, folder: bool, fallback: bool = False) -> None:
    """`flock` the folder `fd` (`fallback`: raise _FolderUnlockable where that cannot work)
    or `lockf` the lock file `fd`, waiting until `deadline`."""
    lock = fcntl.flock if folder else fcntl.lockf
    pause = 0.0005
    while True:
        try:
            lock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except (BlockingIOError, PermissionError) as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise _io_error(exc) from None
            if time.monotonic() >= deadline:
                raise MemhubError(
                    ErrorKind.UNAVAILABLE, "the vault is busy: another memhub process is writing it"
                ) from None
            time.sleep(pause)  # another process holds it for one note's write: back off briefly
            pause = min(pause * 2, 0.02)
        except OSError as exc:
            if fallback and exc.errno in _UNLOCKABLE:
                raise _FolderUnlockable from None
            raise _io_error(exc) from None


def temp_files(root: Path) -> list[Path]:
    """memhub's temporary files anywhere in the vault (symlinked folders not followed)."""
    found = []
    for folder, _dirs, names in os.walk(root):
        found += [Path(folder, name) for name in names if _TEMP_NAME.match(name)]
    return found


def sweep_temp_files(root: Path, wait_s: float = LOCK_WAIT_S, lock_mode: str = "auto") -> int:
    """Delete the temporary files killed writers left behind; how many were deleted.

    Only files named like ours, only regular files, and only while holding the vault lock:
    then no live writer of any process is between creating its temporary file and removing it."""
    if not root.is_dir():
        return 0
    candidates = temp_files(root)  # the walk runs without the lock: writers are not held up
    if not candidates:
        return 0
    removed = 0
    with vault_lock(root, wait_s, lock_mode):
        for path in candidates:
            with contextlib.suppress(OSError):  # gone meanwhile, or not ours to delete
                if path.is_symlink() or not path.is_file():
                    continue
                path.unlink()
                removed += 1
    return removed


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
