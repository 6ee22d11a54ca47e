"""Network helpers shared by the servers (`privlab serve`, `privlab studio`)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for localhost / 127.0.0.0/8 / ::1: only this machine can connect."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
