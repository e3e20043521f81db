"""Which listen addresses only this machine can reach (the app and the API
server refuse any other without an explicit flag)."""

from __future__ import annotations

import ipaddress

LOOPBACK_NAMES = {"localhost"}


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
