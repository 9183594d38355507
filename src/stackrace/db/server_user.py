"""The operating-system account the private mariadbd runs as, and what it may reach.

As root, mariadbd refuses to start without `--user`. `--user=root` would let anyone with
the database's root password write files as root (`SELECT … INTO OUTFILE`), so the
server runs as Debian's `mysql` account (made by the mariadb-server package), owning its
own directory. Without that account it falls back to root and says so. A non-root
stackrace runs the server as itself: there is nothing to switch to.

mariadbd opens its data directory, log, socket and pid file by absolute path *after*
switching user, so every directory above them must be searchable by that account
(`can_traverse`); root's home (0700) is not, which is why the instance may keep its
server files outside its own directory (see `stackrace.db.paths`).
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

PREFERRED = "mysql"


@dataclass(frozen=True)
class ServerUser:
    """Who mariadbd runs as. `name` is the `--user` value ("" when stackrace is not root:
    no --user, the server is simply our own process)."""

    name: str
    uid: int
    gid: int
    groups: frozenset[int]
    note: str = ""  # why this is not the preferred account, for the user to read

    @property
    def user_arg(self) -> list[str]:
        """mariadbd's --user option, when one is needed (only root may switch user)."""
        return [f"--user={self.name}"] if self.name else []

    def can_traverse(self, path: Path) -> bool:
        """True when this account may search `path` and every directory above it."""
        for d in [path, *path.parents]:
            try:
                st = d.stat()
            except OSError:
                return False
            if self.uid == 0:
                continue
            if st.st_uid == self.uid:
                bit = stat.S_IXUSR
            elif st.st_gid in self.groups:
                bit = stat.S_IXGRP
            else:
                bit = stat.S_IXOTH
            if not st.st_mode & bit:
                return False
        return True

    def own(self, path: Path, mode: int) -> None:
        """Make `path` this account's, with `mode` (a no-op chown when it is already ours)."""
        if os.geteuid() == 0 and (path.stat().st_uid, path.stat().st_gid) != (self.uid, self.gid):
            os.chown(path, self.uid, self.gid, follow_symlinks=False)
        os.chmod(path, mode)


def _current() -> ServerUser:
    uid, gid = os.geteuid(), os.getegid()
    return ServerUser(name="", uid=uid, gid=gid, groups=frozenset([gid, *os.getgroups()]))


def _by_name(name: str) -> ServerUser:
    pw = pwd.getpwnam(name)
    groups = frozenset(os.getgrouplist(name, pw.pw_gid))
    return ServerUser(name=name, uid=pw.pw_uid, gid=pw.pw_gid, groups=groups)


def choose(preferred: str = PREFERRED) -> ServerUser:
    """The account a new instance runs as: ourselves when not root; as root, `preferred`
    if it exists, else root with a note that says so."""
    if os.geteuid() != 0:
        return _current()
    try:
        return _by_name(preferred)
    except KeyError:
        root = _by_name("root")
        return ServerUser(
            name="root",
            uid=root.uid,
            gid=root.gid,
            groups=root.groups,
            note=(
                f"the private MariaDB runs as root: there is no '{preferred}' user "
                "(the mariadb-server package creates it); secure_file_priv still keeps "
                "its file access inside its own directory"
            ),
        )


def recorded(name: str) -> ServerUser:
    """The account an existing instance was made to run as ("" = whoever runs stackrace)."""
    if not name or os.geteuid() != 0:
        return _current()
    try:
        user = _by_name(name)
    except KeyError:
        raise LookupError(name) from None
    if name == "root":
        note = "the private MariaDB runs as root (there was no 'mysql' user when it was made)"
        return ServerUser(user.name, user.uid, user.gid, user.groups, note=note)
    return user
