"""User-facing errors and safe output files.

A user's mistake (bad file, bad option, impossible request) raises
:class:`UserError`; the CLI prints its one line and exits with status 2,
never a traceback. Results are written to a temporary file beside the target
and renamed into place, so a crash never leaves half a file behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

EXIT_USAGE = 2


class UserError(Exception):
    """An error caused by the user's input; its message is one line that names
    the file, the line and what was expected where that applies."""


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file next to ``path``; rename it over ``path`` only if
    the block finishes without an exception."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        # mkstemp makes the file private (0600); give it the permissions any
        # newly created file would get under the user's umask.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_text(path: str | os.PathLike) -> str:
    """Read a user's input file, turning OS errors into a one-line UserError."""
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a file") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not a text file ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise UserError(f"{path}: {e.strerror}") from None


def read_toml(path: str | os.PathLike) -> dict:
    """Read a user's TOML file: OS and syntax errors as one line ``file:line: what``."""
    import re
    import tomllib

    text = read_text(path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column \d+\)", str(e))
        line = int(m.group(1)) if m else max(1, len(text.splitlines()))  # else: "at end of document"
        msg = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", str(e))
        raise UserError(f"{path}:{line}: {msg}") from None
