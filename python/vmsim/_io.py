"""Files in and out: config files read only when they are regular files of a
sane size, and every output written atomically (a temporary file in the same
folder, renamed into place), so an interrupted or failed write never leaves a
truncated file that looks complete."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
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


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[str]:
    """Yields a temporary path beside ``path``; once the block ends without an
    exception the temporary file replaces ``path`` in one rename. On any
    exception (Ctrl-C included) the temporary file is removed and ``path`` is
    left as it was."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    suffix = target.suffix  # keeps the format that writers infer from it
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=f".tmp{suffix}", dir=folder)
    except OSError as e:
        raise _naming(e, target) from None
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename == tmp:
            raise _naming(e, target) from None
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
