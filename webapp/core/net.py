"""The client's address, as far as Parley can tell it.

``REMOTE_ADDR`` is the peer that opened the connection. ``X-Forwarded-For`` is believed only
when that peer is one of ``TRUSTED_PROXIES`` (``PARLEY_TRUSTED_PROXIES``: addresses or networks;
empty in embedded mode, where no proxy is in front). Then the header is read from the right,
skipping the trusted proxies' own entries, and the first address left is the one the outermost
trusted proxy saw: whatever a client wrote into the header itself stays to the left of it.
Daphne is not told to parse the header (``--proxy-headers``), because it would believe anyone.

>>> from django.test import RequestFactory
>>> request = RequestFactory().get("/", REMOTE_ADDR="192.0.2.1", HTTP_X_FORWARDED_FOR="10.9.9.9")
>>> client_address(request, trusted=[])
'192.0.2.1'
>>> client_address(request, trusted=["192.0.2.0/24"])
'10.9.9.9'
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(trusted: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in trusted)


def _is_trusted(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(request: HttpRequest, *, trusted: Sequence[str] | None = None) -> str:
    """The address of the client behind any trusted proxies (the peer's own when none)."""
    peer = request.META.get("REMOTE_ADDR", "")
    networks = _networks(tuple(settings.TRUSTED_PROXIES if trusted is None else trusted))
    if not networks or not _is_trusted(peer, networks):
        return peer
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    for hop in reversed(hops):
        if _is_trusted(hop, networks):
            continue
        try:
            return str(ipaddress.ip_address(hop))
        except ValueError:
            return peer  # a mangled header: the proxy's own address is all that is known
    return peer
