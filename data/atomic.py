"""The project's one atomic file writer: readers, and a run killed mid-write, see either the old
complete file or the new complete one, never half of one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def current_umask() -> int:
    """The process's umask, read without changing it where Linux shows it (/proc/self/status: no
    other thread ever sees a different one), else by setting and restoring it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


@contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file beside `path`; on success it is flushed to disk (fsync) and then
    replaces `path` with os.replace (atomic on POSIX). On an error the temporary file is removed.
    The file gets the mode open() would give it (0o666 less the umask), not mkstemp's 0o600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as out:
            os.fchmod(out.fileno(), 0o666 & ~current_umask())
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
