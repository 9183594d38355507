"""Load goes to loopback only, unless the user says otherwise explicitly."""

from __future__ import annotations

import ipaddress
import socket


class RemoteTargetError(ValueError):
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
