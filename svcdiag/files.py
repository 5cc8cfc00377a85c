"""svcdiag's own files: where its state is kept, and every file it writes, written safely.

Root writes into folders a group member may write (`svcdiag setup`'s shared store, a member's own
config folder under it), so no write follows a name that member could have planted
(docs/security.md#what-root-writes): a folder is walked from `/` one name at a time with
O_NOFOLLOW (a symlink on the way is followed only where no one else could have put it there), a
file is opened relative to that folder's descriptor with O_NOFOLLOW and checked on its descriptor
(a regular file, one link, owned by us, root or whoever owns the folder), and a rewrite is a temp
file made O_EXCL in that folder, renamed over the name (a reader sees the old file or the new,
never half, and nothing is written through a link). A planted name is refused in one line naming it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from svcdiag.errors import SvcdiagError

DEFAULT_STATE_DIR = "/var/lib/svcdiag"

#: State (calibration, history, snapshots, caches, bundles) is its owner's only: files 0600 in
#: folders 0700 (docs/security.md). What others must read says so: units and the Prometheus
#: textfile are written 0644.
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
#: A shared store (`svcdiag setup`'s /var/lib/svcdiag): group `svcdiag`, setgid so that what is made
#: there is the group's too, and the history database (and SQLite's -wal, -shm) group-writable
#: (docs/polkit.md): root's starts and an operator's are one history.
SHARED_GROUP = "svcdiag"
SHARED_DIR = 0o2770
SHARED_FILE = 0o660

#: O_PATH: a folder we may search but not list (a home 0711) is walked too
_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


class UnsafePath(SvcdiagError):
    """A name svcdiag would write through is a symlink, a hard link, not a regular file, or someone
    else's: refused, nothing written."""


def state_dir(option: str | None) -> Path:
    """--state-dir, else $SVCDIAG_STATE_DIR, else /var/lib/svcdiag; a file there is one line, exit 2
    (not an empty history read from nowhere)."""
    path = Path(option or os.environ.get("SVCDIAG_STATE_DIR") or DEFAULT_STATE_DIR)
    if path.exists() and not path.is_dir():
        given = "--state-dir" if option else "$SVCDIAG_STATE_DIR" if os.environ.get("SVCDIAG_STATE_DIR") else "state dir"
        raise SvcdiagError(f"{given} {path}: not a directory")
    return path


def private_dir(path: Path) -> Path:
    """`path` and any missing parents, created 0700 (an existing folder keeps its mode), walked as
    open_dir walks it (a planted symlink on the way is refused)."""
    os.close(open_dir(path, make=PRIVATE_DIR))
    return path


def shared(folder: Path) -> bool:
    """Whether `folder` is a group's shared store: setgid and group-writable (SHARED_DIR)."""
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    return bool(mode & stat.S_ISGID) and mode & 0o070 == 0o070


# ---------------------------------------------------------------- folders


def _others_may_write(st: os.stat_result) -> bool:
    """Whether someone but its owner (and root) may rename what is in this folder: group- or
    world-writable and not sticky (in /tmp only a link's owner may remove it)."""
    return bool(st.st_mode & 0o022) and not st.st_mode & stat.S_ISVTX


def _trusted(uid: int) -> bool:
    return uid in (0, os.geteuid())


def open_dir(path: Path | str, *, make: int | None = None) -> int:
    """A descriptor of folder `path` (close it), reached from `/` one name at a time with
    O_NOFOLLOW. A symlink on the way is followed only when it is ours or root's in a folder no one
    else may write (/var/run, a home moved by its admin); one anyone else could have planted is
    refused. Missing folders are made with mode `make` (set with fchmod: the umask does not narrow
    it); without `make`, a missing one is FileNotFoundError."""
    path = Path(os.path.abspath(path))
    fd = os.open("/", _DIR_FLAGS)
    try:
        for i, name in enumerate(path.parts[1:], start=2):
            here = Path(*path.parts[:i])
            try:
                nfd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if make is None:
                    raise
                try:
                    os.mkdir(name, make, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                if stat.S_IMODE(os.fstat(nfd).st_mode) != make and os.fstat(nfd).st_uid == os.geteuid():
                    rfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                    try:
                        if os.path.samestat(os.fstat(rfd), os.fstat(nfd)):
                            os.fchmod(rfd, make)
                    finally:
                        os.close(rfd)
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISLNK(st.st_mode):
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(here)) from None
                parent = os.fstat(fd)
                why = (f"owned by uid {st.st_uid}" if not _trusted(st.st_uid) else
                       f"in a folder owned by uid {parent.st_uid}" if not _trusted(parent.st_uid) else
                       "in a folder others may write" if _others_may_write(parent) else None)
                if why:
                    raise UnsafePath(f"{here}: a symbolic link someone else could have made ({why}): refused, "
                                     f"nothing written through it; remove it") from None
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)  # its owner's choice, in a folder only it may change
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


# ---------------------------------------------------------------- files


def _check(fd: int, path: Path, dfd: int) -> None:
    """The file on `fd` is one root may write: a regular file with one name (a hard link to
    /etc/shadow would be written too), owned by us, root, the folder's owner (a member's own
    folder), or, in a shared store, of the store's group (its members' files by design)."""
    st, folder = os.fstat(fd), os.fstat(dfd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePath(f"{path}: not a regular file: refused, nothing written to it; remove it")
    if st.st_nlink > 1:
        raise UnsafePath(f"{path}: has {st.st_nlink} hard links (another name for the same file, perhaps "
                         f"outside this folder): refused, nothing written to it; remove it")
    if _trusted(st.st_uid) or st.st_uid == folder.st_uid:
        return
    if folder.st_mode & stat.S_ISGID and folder.st_mode & 0o070 == 0o070 and st.st_gid == folder.st_gid:
        return
    raise UnsafePath(f"{path}: owned by uid {st.st_uid}, not by this user, root or the folder's owner: refused, "
                     f"nothing written to it; remove it")


def _refuse_link(name: str, path: Path, dfd: int) -> None:
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(f"{path}: a symbolic link (owner uid {st.st_uid}): refused, nothing written through it; "
                         f"remove it")


@contextmanager
def open_append(path: Path, mode: int = PRIVATE_FILE, make: int = PRIVATE_DIR) -> Iterator[int]:
    """A descriptor (O_RDWR | O_APPEND) of `path`, made `mode` when missing, its folders `make`;
    a symlink, FIFO, hard link or someone else's file there is refused before a byte is written."""
    path = Path(os.path.abspath(path))
    dfd = open_dir(path.parent, make=make)
    try:
        _refuse_link(path.name, path, dfd)
        try:
            fd = os.open(path.name, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         mode, dir_fd=dfd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise UnsafePath(f"{path}: a symbolic link: refused, nothing written through it; remove it") from None
            raise
        try:
            _check(fd, path, dfd)
            yield fd
        finally:
            os.close(fd)
    finally:
        os.close(dfd)


def open_lock(path: Path, mode: int = 0o644, make: int = 0o755) -> int:
    """A lock file's descriptor (for flock; nothing is written to it), opened as open_append opens."""
    path = Path(os.path.abspath(path))
    dfd = open_dir(path.parent, make=make)
    try:
        _refuse_link(path.name, path, dfd)
        try:
            fd = os.open(path.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=dfd)
        except PermissionError:
            fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        try:
            _check(fd, path, dfd)
        except BaseException:
            os.close(fd)
            raise
        return fd
    finally:
        os.close(dfd)


def check_existing(path: Path, *, names: tuple[str, ...] = ()) -> None:
    """Refuse `path` (and the companions named `path`+suffix in `names`: SQLite's -wal, -shm,
    -journal) if any is there and is a symlink, a hard link, not a regular file, or someone else's:
    for a file another program (SQLite) opens by name. Missing ones are fine."""
    path = Path(os.path.abspath(path))
    dfd = open_dir(path.parent)
    try:
        for suffix in ("", *names):
            name = path.name + suffix
            _refuse_link(name, path.with_name(name), dfd)
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
            except FileNotFoundError:
                continue
            except PermissionError:
                continue  # not ours to open: SQLite will say so
            try:
                _check(fd, path.with_name(name), dfd)
            finally:
                os.close(fd)
    finally:
        os.close(dfd)


Writer = Callable[[BinaryIO], None]


def write_atomic(path: Path, content: str | bytes | Writer, mode: int = PRIVATE_FILE) -> None:
    """Write a temp file made O_EXCL beside the target (in the folder's descriptor), fsync, rename
    over the name: a reader sees the old file or the new, never half, and a symlink or hard link at
    the name is never written through (a symlink there is refused: someone planted it). The file is
    its owner's only unless `mode` says otherwise (missing folders likewise). `content` is text,
    bytes, or a function that writes to the binary file (a tar archive)."""
    path = Path(os.path.abspath(path))
    dfd = open_dir(path.parent, make=0o755 if mode & 0o044 else PRIVATE_DIR)
    try:
        _refuse_link(path.name, path, dfd)
        tmp = f".{path.name}.{os.urandom(6).hex()}"  # not `secrets`: it loads hashlib (OpenSSL), ~3 ms
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as f:
                if isinstance(content, str):
                    f.write(content.encode("utf-8"))
                elif isinstance(content, bytes):
                    f.write(content)
                else:
                    content(f)
                f.flush()
                os.fchmod(f.fileno(), mode)
                os.fsync(f.fileno())
            os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except FileNotFoundError:
                pass
            raise
        _sync_dir(dfd)
    finally:
        os.close(dfd)


def _sync_dir(dfd: int) -> None:
    """fsync the folder (the rename's entry) where we may read it; a folder we may only search
    keeps the rename in the page cache until the kernel writes it."""
    try:
        rfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return
    try:
        os.fsync(rfd)
    finally:
        os.close(rfd)


# ---------------------------------------------------------------- reading what others may have put there


class NotRegular(UnsafePath, OSError):
    """A file that is not one to read: `why` says what it is (the message: PATH: why). Also an
    OSError, so a reader that treats an unreadable file as missing (a cache) does so here too."""

    def __init__(self, path: Path | str, why: str):
        self.path, self.why = path, why
        super().__init__(f"{path}: {why}")


#: the most a state file svcdiag reads back may hold (a tune run's, a snapshot, the version cache)
STATE_MAX_BYTES = 64 * 1024 * 1024


def read_text(path: Path | str, limit: int = STATE_MAX_BYTES, errors: str = "strict") -> str:
    """read_regular's bytes as UTF-8: a state file a member may have replaced with a FIFO never hangs."""
    return read_regular(path, limit).decode("utf-8", errors)


def read_regular(path: Path | str, limit: int) -> bytes:
    """The bytes of `path` if it is a regular file of at most `limit` bytes. A FIFO, a device, a
    symlink to one (/dev/zero) is refused without blocking on it (O_NONBLOCK, then fstat), a larger
    file without reading it all: NotRegular, naming the file. OSError as open raises it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or \
                stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file"
            raise NotRegular(path, f"{kind}, not a regular file: not read")
        if st.st_size > limit:
            raise NotRegular(path, f"{st.st_size} bytes, more than the {limit} a file here may hold: not read")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise NotRegular(path, f"more than the {limit} bytes a file here may hold: not read")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
