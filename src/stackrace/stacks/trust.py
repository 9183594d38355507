"""The stacks files the user trusted, remembered by their content, as direnv does.

A `./stacks.toml` in the current directory is read on top of the shipped stacks
(config.stacks_files), which is what lets a project carry its own stacks. It is also
what a cloned repository can use to run its own command under a shipped stack's name:
`stackrace bench --stacks uvicorn` in that directory would run the repository's
"uvicorn". So a file found there that *replaces* a stack of the files below it is not
used until the user says so once, `stackrace stacks --trust ./stacks.toml`, which
records the file's absolute path and the SHA-256 of its content here. A file that
changes afterwards (a `git pull`) is a file not trusted yet: it must be trusted again.
A file named with `--stacks-file` is asked for by name and needs no trust.

The record is `trusted-stacks.json` in the config directory (stackrace.base.paths), written
whole or not at all (stackrace.base.atomicfile), mode 0600. A record that cannot be read is
no trust at all, never an error.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import msgspec

from stackrace.base import paths
from stackrace.base.atomicfile import write_atomic

FILE_NAME = "trusted-stacks.json"


class _Record(msgspec.Struct):
    files: dict[str, str] = {}  # absolute path -> sha256 of the content trusted


def record_path() -> Path:
    return paths.config_dir() / FILE_NAME


def _read() -> _Record:
    with contextlib.suppress(OSError, msgspec.DecodeError, msgspec.ValidationError):
        return msgspec.json.decode(record_path().read_bytes(), type=_Record)
    return _Record()


def is_trusted(path: Path, sha256: str) -> bool:
    """Whether this file, with this content, was trusted."""
    return _read().files.get(str(path.resolve())) == sha256


def trust(path: Path, sha256: str) -> Path:
    """Remember this file with this content as trusted; the record's path. OSError when
    the config directory cannot be written."""
    record = _read()
    record.files[str(path.resolve())] = sha256
    target = record_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, msgspec.json.format(msgspec.json.encode(record), indent=2), mode=0o600)
    return target
