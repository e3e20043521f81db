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
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

LOOPBACK_NAMES = {"localhost"}
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
WILDCARDS = {"0.0.0.0", "::", ""}
# The tunnel of gradio's --share link forwards requests under this domain's names.
SHARE_DOMAIN = ".gradio.live"


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


def host_of(header: str) -> str:
    """'Example.org:7860' -> 'example.org', '[::1]:8000' -> '::1'; '' for a header that is not a host."""
    try:
        return (urlsplit("//" + header.strip()).hostname or "").lower()
    except ValueError:   # a malformed port or bracket
        return ""


def _netloc(url: str) -> str | None:
    """The host:port part of an Origin; None for one that is not a URL ('http://[::1' included)."""
    try:
        return urlsplit(url).netloc.lower()
    except ValueError:
        return None


def host_allowed(header: str, allowed: set[str], share: bool = False) -> bool:
    host = host_of(header)
    return bool(host) and (host in allowed or (share and host.endswith(SHARE_DOMAIN)))


def _bare(name: str) -> str:
    name = name.strip().lower()
    return name[1:-1] if name.startswith("[") and name.endswith("]") else name


def _own_addresses() -> set[str]:
    import psutil

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
            # Same origin = the page's own address is the one this request went to.
            if origin == "null" or _netloc(origin) != host.strip().lower():
                return 403, "origin", origin
        return None


def host_guard(listen_host: str, extra: Iterable[str] = (), share: bool = False):
    """HostCheck for the app (app.py), as the Middleware entry a FastAPI app is built with (gradio's
    launch(app_kwargs=...)): its refusals are plain sentences, which a browser shows as they are."""
    from starlette.middleware import Middleware

    return Middleware(HostCheck, allowed=allowed_hosts(listen_host, extra), refuse=_plain_refusal, share=share)


def _plain_refusal(status: int, reason: str, value: str):
    from starlette.responses import PlainTextResponse

    from backend.messages import msg

    text = msg("host.refused", host=value) if reason == "host" else msg("host.cross_site", origin=value)
    return PlainTextResponse(str(text) + "\n", status_code=status)
