"""Load goes to loopback only, unless the user says otherwise explicitly.

A cluster run (`--cluster`, stackrace.cluster) widens this by exactly the cluster's own
node addresses: `require_loopback_or_member`. Nothing else is ever a target without
--allow-remote.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

from stackrace.base.errors import StackraceError


class RemoteTargetError(StackraceError, ValueError):
    """A target that is not on this machine, without --allow-remote."""


def resolve(host: str) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise RemoteTargetError(f"cannot resolve {host!r}: {exc.strerror}") from None
    return sorted({str(info[4][0]) for info in infos})


def is_loopback(host: str) -> bool:
    """True when every address the host name resolves to is a loopback address."""
    addrs = resolve(host)
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


def require_loopback(host: str, allow_remote: bool, what: str = "target") -> None:
    if allow_remote:
        return
    if not is_loopback(host):
        raise RemoteTargetError(
            f"{what} {host!r} is not on loopback ({', '.join(resolve(host))}); stackrace only "
            "sends load to this machine unless you pass --allow-remote"
        )


def require_loopback_or_member(host: str, members: Iterable[str], what: str = "target") -> None:
    """Cluster runs: every address of `host` is loopback or one of the cluster's nodes."""
    allowed = {a.split("%")[0] for a in members}
    addrs = resolve(host)
    outside = [
        a
        for a in addrs
        if a.split("%")[0] not in allowed and not ipaddress.ip_address(a.split("%")[0]).is_loopback
    ]
    if not addrs or outside:
        raise RemoteTargetError(
            f"{what} {host!r} ({', '.join(outside or addrs)}) is neither loopback nor a node "
            f"of the cluster ({', '.join(sorted(allowed)) or 'none'}); a cluster run only "
            "sends load to its own nodes"
        )
