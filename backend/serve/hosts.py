"""Which addresses the app and the API server listen on and answer as.

Listening: only this machine's loopback addresses unless a flag says
otherwise (`is_loopback`).

Answering (DNS rebinding and cross-site requests): a page on another site can
point its own name at 127.0.0.1 and then talk to a local server as if it were
its own origin. The browser still sends that name in the `Host` header, so a
server that answers only the names it listens as (`allowed_hosts`) is out of
its reach; and a request a browser sends from another origin carries that
origin in `Origin`, which must then be this server's own (`HostCheck`).
Clients that are not browsers (curl, the openai package) send no Origin.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable

import psutil
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse

from backend.messages import msg

LOOPBACK_NAMES = {"localhost"}
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
WILDCARDS = {"0.0.0.0", "::", ""}
# The tunnel of gradio's --share link forwards requests under this domain's names.
SHARE_DOMAIN = ".gradio.live"
# host[:port] of a Host header: a name or IPv4 address, or an IPv6 address in brackets (checked after).
_HOST = re.compile(r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9.-]+))(?::(?P<port>[0-9]{1,5}))?")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def allowed_hosts(listen_host: str, extra: Iterable[str] = ()) -> set[str]:
    """The names (lower case, without port or brackets) a server listening on `listen_host` answers as:
    the loopback names, the listen address itself, the names given with --allow-remote, and, when it
    listens on every interface, this machine's own addresses and host name."""
    names = set(LOOPBACK_HOSTS) | {_bare(listen_host)} | {_bare(name) for name in extra if name}
    if _bare(listen_host) in WILDCARDS:
        names |= _own_addresses()
    return names - WILDCARDS


def base_url(host: str, port: int) -> str:
    """The API's address for clients of a server listening on host:port (an IPv6 address in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/v1"


def parse_host(header: str) -> tuple[str, int | None] | None:
    """A Host header as (host, port): 'Example.org:7860' -> ('example.org', 7860), '[::1]:8000' ->
    ('::1', 8000), 'localhost' -> ('localhost', None). None for anything else: a user part
    ('evil.com@localhost'), a port that is not a number from 1 to 65535, any other character.
    Strict because a lenient parse answers a name it was never given (urlsplit reads
    'evil.com@localhost:P' as localhost, and lets 'localhost:abc' through)."""
    match = _HOST.fullmatch(header.strip(" \t")) if header.isascii() else None
    if match is None:
        return None
    port = int(match["port"]) if match["port"] is not None else None
    if port is not None and not 1 <= port <= 65535:
        return None
    host = _ipv6(match["ipv6"]) if match["ipv6"] is not None else _hostname(match["name"].lower())
    return None if host is None else (host, port)


def parse_origin(header: str) -> tuple[str, str, int | None] | None:
    """An Origin header as (scheme, host, port), http or https only: 'null', file:// and anything with
    a path or a user part are None (a page that is not this server's own)."""
    scheme, separator, address = header.partition("://")
    if not separator or scheme.lower() not in ("http", "https"):
        return None
    parsed = parse_host(address)
    return None if parsed is None else (scheme.lower(), *parsed)


def _hostname(name: str) -> str | None:
    """A DNS name (labels of letters, digits and inner hyphens) or a dotted IPv4 address, else None."""
    labels = name.split(".")
    if labels[-1].isdigit():   # numeric last label: an IPv4 address or nothing (as browsers read it)
        try:
            return str(ipaddress.IPv4Address(name))
        except ValueError:
            return None
    return name if len(name) <= 253 and all(_LABEL.fullmatch(label) for label in labels) else None


def _ipv6(text: str) -> str | None:
    try:
        return ipaddress.IPv6Address(text).compressed
    except ValueError:
        return None


def host_of(header: str) -> str:
    """'Example.org:7860' -> 'example.org', '[::1]:8000' -> '::1'; '' for a header that is not a host."""
    parsed = parse_host(header)
    return parsed[0] if parsed else ""


def host_allowed(header: str, allowed: set[str], share: bool = False) -> bool:
    host = host_of(header)
    return bool(host) and (host in allowed or (share and host.endswith(SHARE_DOMAIN)))


def _bare(name: str) -> str:
    name = name.strip().lower()
    name = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    return _ipv6(name) or name   # an IPv6 address written as parse_host gives it back


def _own_addresses() -> set[str]:
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family in (socket.AF_INET, socket.AF_INET6):
                names.add(address.address.split("%")[0].lower())   # fe80::1%eth0 -> fe80::1
    return names


class HostCheck:
    """ASGI middleware: answers `refuse(status, reason, value)` (an ASGI app) to a request whose Host
    is not one this server answers as (400), or that a browser sent from another origin (403)."""

    def __init__(self, app, allowed: set[str], refuse: Callable[[int, str, str], Callable], share: bool = False):
        self.app, self.allowed, self.refuse, self.share = app, allowed, refuse, share

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            problem = self.problem(dict(scope.get("headers") or ()))
            if problem is not None:
                if scope["type"] == "websocket":   # no HTTP answer on a websocket: close it
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await self.refuse(*problem)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def problem(self, headers: dict[bytes, bytes]) -> tuple[int, str, str] | None:
        host = headers.get(b"host", b"").decode("latin-1")
        if not host_allowed(host, self.allowed, self.share):
            return 400, "host", host
        origin = headers.get(b"origin")
        if origin is not None:
            origin = origin.decode("latin-1")
            # Same origin = the page's own address (host and port) is the one this request went to.
            parsed = parse_origin(origin)
            if parsed is None or parsed[1:] != parse_host(host):
                return 403, "origin", origin
        return None


def host_guard(listen_host: str, extra: Iterable[str] = (), share: bool = False):
    """HostCheck for the app (app.py), as the Middleware entry a FastAPI app is built with (gradio's
    launch(app_kwargs=...)): its refusals are plain sentences, which a browser shows as they are."""

    return Middleware(HostCheck, allowed=allowed_hosts(listen_host, extra), refuse=_plain_refusal, share=share)


def _plain_refusal(status: int, reason: str, value: str):
    text = msg("host.refused", host=value) if reason == "host" else msg("host.cross_site", origin=value)
    return PlainTextResponse(str(text) + "\n", status_code=status)
