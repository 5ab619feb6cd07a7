"""Files that hold secrets (tokens, private keys, kubeconfigs): private from their first byte.

A secret file is written to a temporary file created with ``O_EXCL`` and mode 0600 in
the target's directory (:func:`tempfile.mkstemp`), then renamed over the target: a file
planted at a predictable temporary name cannot be reused, and no reader ever sees a
partly written or world-readable secret. Directories holding them are forced to 0700,
whatever mode they had.
"""

from __future__ import annotations

import contextlib
import os
import tempfile


def private_dir(path: str) -> None:
    """Create ``path`` (and parents) if needed and force it to mode 0700. OSError when that fails."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)  # an existing directory keeps its mode otherwise


class UnsafeFile(Exception):
    """A file holding secrets that others may have written (its mode or owner): it is not trusted."""


def read_secret(path: str) -> bytes:
    """The contents of a secret file, refused (:class:`UnsafeFile`) when a group or others may write
    it or it belongs to another user than this process's (or root): a token or key planted there
    would be trusted. OSError when it cannot be read (FileNotFoundError: absent)."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_mode & 0o022:
            raise UnsafeFile(f"{path}: mode {st.st_mode & 0o777:04o} lets others write it; expected 0600 or 0400")
        if st.st_uid not in (os.getuid(), 0):
            raise UnsafeFile(f"{path}: owned by uid {st.st_uid}; expected this process's ({os.getuid()}) or root's")
        return fh.read()


def write_secret(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, readable and writable by the owner only. OSError when it fails."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
