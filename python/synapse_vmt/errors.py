"""User-facing errors and safe output files.

A user's mistake (bad file, bad option, impossible request) raises
:class:`UserError`; the CLI prints its one line and exits with status 2,
never a traceback. Results are written to a temporary file beside the target
and renamed into place, so a crash never leaves half a file behind.
"""

from __future__ import annotations

import contextlib
import os
import re
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


@contextlib.contextmanager
def _reading(path: str | os.PathLike) -> Iterator[None]:
    """Turn the OS errors of opening or reading a user's input file into a
    one-line UserError naming it."""
    try:
        yield
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a file") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not a text file ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise UserError(f"{path}: {e.strerror}") from None


def read_text(path: str | os.PathLike) -> str:
    """Read a user's input file, turning OS errors into a one-line UserError."""
    with _reading(path):
        return Path(path).read_text()


def open_binary(path: str | os.PathLike) -> IO[bytes]:
    """Open a user's input file for reading bytes, OS errors as a one-line UserError."""
    with _reading(path):
        return open(path, "rb")


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


class TomlLines:
    """Finds the line of a key in a TOML file (a scenario, a grid), section by
    section, so an error can say where (tomllib's values carry no lines)."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.headers: list[tuple[int, str]] = []  # (line, "grid" | "points" | "set" | ...)
        for i, ln in enumerate(self.lines, 1):
            m = re.match(r"\s*\[\[?\s*([A-Za-z0-9_\-\"'.]+)", ln)
            if m and ln.lstrip().startswith("["):
                self.headers.append((i, m.group(1).strip("\"'").split(".")[0]))

    def section(self, name: str, nth: int = 0) -> tuple[int, int]:
        """(first, last) line of the nth ``[name]``/``[[name]]`` section; the
        part before any header for ``""``; the whole file if there is none."""
        starts = [i for i, h in self.headers if h == name]
        if name == "":
            return 1, (self.headers[0][0] - 1 if self.headers else len(self.lines))
        if nth >= len(starts):
            return 1, len(self.lines)
        later = [i for i, _ in self.headers if i > starts[nth]]
        return starts[nth], (later[0] - 1 if later else len(self.lines))

    def key(self, dotted: str, name: str = "", nth: int = 0) -> int:
        first, last = self.section(name, nth)
        parts = dotted.split(".")
        pats = [re.escape(dotted), re.escape(".".join(f'"{p}"' if not p.isidentifier() else p for p in parts)), re.escape(parts[-1])]
        for pat in pats:
            rx = re.compile(r"""^\s*(?:["']?)""" + pat + r"""(?:["']?)\s*=""")
            for i in range(first, min(last, len(self.lines)) + 1):
                if rx.search(self.lines[i - 1]):
                    return i
        return next((i for i, h in self.headers if h == dotted), first)  # a [table] of that name
