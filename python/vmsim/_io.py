"""Files in and out: config files read only when they are regular files of a
sane size, and every output written atomically (a temporary file in the same
folder, renamed into place), so an interrupted or failed write never leaves a
truncated file that looks complete. Outputs that are not files (a terminal,
/dev/null, a FIFO) are written through instead of being replaced."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Iterator, Union

PathLike = Union[str, "os.PathLike[str]"]

#: Largest config file read (the core applies the same bound to presets).
MAX_CONFIG_FILE_BYTES = 1 << 20


def read_regular_text(path: PathLike, what: str = "config file") -> str:
    """The text of ``path``; refuses anything but a regular file of at most
    ``MAX_CONFIG_FILE_BYTES`` (a FIFO would block, ``/dev/zero`` never ends)."""
    p = os.fspath(path)
    st = os.stat(p)  # FileNotFoundError names the file
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{p}: not a regular file; a {what} must be one")
    if st.st_size > MAX_CONFIG_FILE_BYTES:
        raise ValueError(f"{p}: {st.st_size} bytes; a {what} is at most {MAX_CONFIG_FILE_BYTES} bytes")
    with open(p, encoding="utf-8") as f:
        return f.read(MAX_CONFIG_FILE_BYTES + 1)


#: Outputs written through (no temporary file, no rename): a character
#: device such as a terminal or /dev/null, a FIFO, or a /proc/self/fd link
#: (as /dev/stdout is) whatever it leads to.
STREAM = "stream"
#: Outputs written to a temporary file beside them and renamed into place.
FILE = "file"

_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFSOCK: "a socket", stat.S_IFBLK: "a block device"}
ACCEPTED_OUTPUTS = ("accepted: a regular file (or a symbolic link to one, written beside its target), "
                    "a character device or a FIFO (written through)")


def output_target(path: PathLike) -> tuple:
    """(kind, target) for an output ``path``: (``FILE``, the path the file is
    to be renamed to, symbolic links followed) or (``STREAM``, ``path``, to be
    opened and written through). Anything else (a folder, a socket, a block
    device) raises ``ConfigError`` keyed by the path, naming what it is;
    ``OSError`` (naming ``path``) when a link cannot be followed."""
    p = os.fspath(path)
    cur = os.path.abspath(p)
    for _ in range(40):
        cur = os.path.join(os.path.realpath(os.path.dirname(cur)), os.path.basename(cur))
        if cur == "/proc" or cur.startswith("/proc/"):
            # /dev/stdout and /dev/fd/N: the descriptor's file, whatever it is,
            # is written through; a rename would replace the link, not it.
            return _stream_or_refuse(p, os.stat(p).st_mode)
        if not os.path.islink(cur):
            break
        cur = os.path.join(os.path.dirname(cur), os.readlink(cur))
    else:
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), p)
    try:
        mode = os.stat(cur).st_mode
    except FileNotFoundError:
        return FILE, cur  # a new file (a dangling link's target too)
    if stat.S_ISREG(mode):
        return FILE, cur
    return _stream_or_refuse(p, mode)


def _stream_or_refuse(p: str, mode: int) -> tuple:
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISREG(mode):
        return STREAM, p
    from ._errors import config_error

    what = _KINDS.get(stat.S_IFMT(mode), "not a file")
    raise config_error(cut_path(p), f"is {what}, not an output file; {ACCEPTED_OUTPUTS}")


def cut_path(p: str, limit: int = 200) -> str:
    return p if len(p) <= limit else f"{p[:limit]}… ({len(p)} characters)"


def is_stream(path: PathLike) -> bool:
    """Whether ``path`` is written through rather than replaced (see ``output_target``)."""
    return output_target(path)[0] == STREAM


def _temp_prefix(name: str) -> str:
    return f".{name}."


def _stale_temp(folder: str, name: str, suffix: str) -> None:
    """Removes temporary files that an earlier write of ``name`` left in
    ``folder`` when killed (SIGKILL, power loss)."""
    remove_stale(folder, _temp_prefix(name), f".tmp{suffix}")


def remove_stale(folder: str, prefix: str, end: str = "", folders: bool = False) -> None:
    """Removes the entries of ``folder`` named ``PREFIX<pid>-…END`` whose
    writer (process ``pid``) is gone, and those named ``PREFIX…END`` without a
    pid (written before the pid was in the name) once an hour old: what a
    killed writer left. ``folders``: they are folders, removed whole."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(prefix) and entry.endswith(end)) or len(entry) <= len(prefix) + len(end):
            continue
        middle = entry[len(prefix):len(entry) - len(end)]
        pid, sep, _ = middle.partition("-")
        full = os.path.join(folder, entry)
        with contextlib.suppress(OSError):
            if sep and pid.isdigit():
                if int(pid) == os.getpid() or _alive(int(pid)):
                    continue
            elif time.time() - os.lstat(full).st_mtime < 3600:
                continue
            mode = os.lstat(full).st_mode
            if folders and stat.S_ISDIR(mode):
                shutil.rmtree(full)
            elif not folders and stat.S_ISREG(mode):
                os.unlink(full)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process
    return True


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[str]:
    """Yields a temporary path; once the block ends without an exception what
    was written there becomes ``path``'s content.

    A regular file (new or not) is replaced in one rename of a temporary file
    beside it, so it is never seen half-written; a symbolic link is followed
    and its target replaced so. A character device or a FIFO (``/dev/null``, a
    terminal, a pipe, ``/dev/stdout``) is written through instead: the node
    stays. Anything else is refused (``ConfigError`` keyed by the path). On
    any exception (Ctrl-C included) the temporary file is removed and
    ``path`` is left as it was. Temporary files that a killed earlier write
    of the same file left behind are removed first."""
    kind, real = output_target(path)
    target = Path(real)
    suffix = target.suffix  # keeps the format that writers infer from it
    if kind == STREAM:
        fd, tmp = tempfile.mkstemp(prefix="vmsim-out.", suffix=f".tmp{suffix}")
        os.close(fd)
        try:
            yield tmp
            # A regular file behind /proc/self/fd is appended to: truncating
            # it would lose what the shell's >> kept.
            mode = "ab" if stat.S_ISREG(os.stat(real).st_mode) else "wb"
            with open(tmp, "rb") as src, open(real, mode) as dst:
                shutil.copyfileobj(src, dst)
        except OSError as e:
            if e.filename in (None, tmp, real):
                raise _naming(e, Path(os.fspath(path))) from None
            raise
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return
    folder = target.parent if str(target.parent) else Path(".")
    _stale_temp(os.fspath(folder), target.name, suffix)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{_temp_prefix(target.name)}{os.getpid()}-", suffix=f".tmp{suffix}",
                                   dir=folder)
    except OSError as e:
        raise _naming(e, Path(os.fspath(path))) from None
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename in (None, tmp):
            # Also a write that failed (ENOSPC, EIO): its error names no file.
            raise _naming(e, Path(os.fspath(path))) from None
        raise


def _naming(e: OSError, target: Path) -> OSError:
    """``e`` naming ``target``: the temporary file's name means nothing to the user."""
    return OSError(e.errno, e.strerror, os.fspath(target)) if e.errno is not None else e


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: PathLike, text: str) -> None:
    """Writes ``text`` to ``path`` atomically (see ``atomic_path``)."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
