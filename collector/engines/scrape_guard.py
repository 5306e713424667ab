"""Where the engine scraper may send a request: the guard against server-side request forgery.

An engine URL is a request the collector makes on someone's say, every few seconds, from
inside the network it runs in. ``HostPolicy`` decides which hosts it may reach:

- the scheme is http or https, the URL names a host and carries no credentials;
- every address the host resolves to is allowed: a loopback address, or one inside a
  network of ``AGENTWATCH_SCRAPE_ALLOWED_HOSTS``, or any address of a host *named* there
  (and of the hosts of ``AGENTWATCH_SCRAPE_TARGETS``, the operator's own configuration);
- link-local addresses (169.254.0.0/16, fe80::/10, where clouds answer with instance
  credentials), the known metadata addresses, unspecified, multicast and reserved addresses
  are refused always, whatever the allow-list says.

The check runs when an engine is registered and again at every scrape, on a fresh
resolution; the request then goes to the very address that was checked (the URL's host is
replaced by it, ``Host`` and TLS SNI keep the name), so a name that resolves elsewhere the
second time (DNS rebinding) cannot slip between check and connect. Redirects are never
followed; the response is bounded in size and in total time (``fetch_metrics``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import SplitResult, urlsplit

import httpx

from agentwatch_platform.collector.errors import CollectorError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]

# Cloud metadata services outside 169.254.0.0/16 (which is refused as link-local anyway).
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.170.2",
        "fd00:ec2::254",
        "100.100.100.200",
        "168.63.129.16",
        "192.0.0.192",
    )
)


class TargetRefused(CollectorError, ValueError):
    """An engine URL, or the address it resolves to, that the collector will not request."""


async def system_resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (the system resolver, off the event loop)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def _normalise(address: IPAddress) -> IPAddress:
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address


def forbidden_reason(address: IPAddress) -> str:
    """Why ``address`` is never requested, or "" when it may be (allow-list permitting)."""
    address = _normalise(address)
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_unspecified or address.is_multicast or (address.is_reserved and not address.is_loopback):
        return "an unspecified, multicast or reserved address"
    return ""


@dataclass
class HostPolicy:
    """Which hosts the scraper may reach; ``resolve`` is the system resolver unless a test swaps it."""

    names: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()
    resolve: Resolver = field(default=system_resolve)

    @classmethod
    def from_setting(cls, allowed: str, *, configured_hosts: Iterable[str] = ()) -> HostPolicy:
        """``AGENTWATCH_SCRAPE_ALLOWED_HOSTS``: names, IP addresses or CIDRs, comma-separated."""
        names, networks = {h.lower() for h in configured_hosts if h}, []
        for entry in filter(None, (part.strip() for part in allowed.split(","))):
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                names.add(entry.lower().rstrip("."))
        return cls(frozenset(names), tuple(networks))

    def check_url(self, url: str) -> SplitResult:
        """The parts of a URL the scraper may be pointed at (before resolving its host)."""
        try:
            parts = urlsplit(url)
        except ValueError as exc:  # e.g. "http://[]": an empty or malformed IPv6 host
            raise TargetRefused(f"not a valid URL: {exc}") from None
        if parts.username is not None or parts.password is not None:  # first: the messages below quote the URL
            raise TargetRefused("credentials in an engine URL are not accepted (the URL is listed back to readers)")
        if parts.scheme not in ("http", "https"):
            raise TargetRefused(f"{url!r}: only http and https URLs can be scraped")
        if not parts.hostname:
            raise TargetRefused(f"{url!r}: the URL names no host")
        try:
            parts.port  # noqa: B018 - raises on a port out of range
        except ValueError as exc:
            raise TargetRefused(f"{url!r}: {exc}") from None
        return parts

    def check_address(self, host: str, address: str) -> IPAddress:
        ip = _normalise(ipaddress.ip_address(address.split("%", 1)[0]))
        if reason := forbidden_reason(ip):
            raise TargetRefused(f"{host} resolves to {ip}, {reason}: never scraped")
        if ip.is_loopback or host.lower().rstrip(".") in self.names or any(ip in net for net in self.networks):
            return ip
        raise TargetRefused(f"{host} ({ip}) is neither loopback nor in AGENTWATCH_SCRAPE_ALLOWED_HOSTS")

    async def pin(self, url: str) -> tuple[SplitResult, IPAddress]:
        """The URL's parts and the one checked address to connect to; every resolved address must pass."""
        parts = self.check_url(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            addresses = await self.resolve(host, port)
        except (
            OSError,
            UnicodeError,
        ) as exc:  # UnicodeError: a name IDNA cannot encode (found by schemathesis: was a 500)
            raise TargetRefused(f"cannot resolve {host!r}: {exc}") from None
        if not addresses:
            raise TargetRefused(f"{host} resolves to no address")
        checked = [self.check_address(host, a) for a in addresses]
        return parts, checked[0]

    def check(self, url: str) -> None:
        """``pin`` for synchronous callers (registration, in a worker thread)."""
        asyncio.run(self.pin(url))


def pinned_url(parts: SplitResult, address: IPAddress) -> str:
    host = f"[{address}]" if address.version == 6 else str(address)
    netloc = f"{host}:{parts.port}" if parts.port else host
    return parts._replace(netloc=netloc).geturl()


async def fetch_metrics(
    client: httpx.AsyncClient, policy: HostPolicy, url: str, *, max_bytes: int, timeout_s: float
) -> str:
    """GET ``url`` at its checked address: no redirect followed, at most ``max_bytes``, ``timeout_s`` in all."""
    parts, address = await policy.pin(url)
    host_header = parts.netloc.rsplit("@", 1)[-1]
    extensions = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
    try:
        async with asyncio.timeout(timeout_s):
            request = client.build_request(
                "GET", pinned_url(parts, address), headers={"Host": host_header}, extensions=extensions
            )
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                return await _read_bounded(response, max_bytes)
            finally:
                await response.aclose()
    except TimeoutError:
        raise TargetRefused(f"no complete response within {timeout_s:g} s") from None


async def _read_bounded(response: httpx.Response, max_bytes: int) -> str:
    if response.is_redirect:
        raise TargetRefused(
            f"answered {response.status_code} redirect to {response.headers.get('location', '?')!r}: redirects are not followed"
        )
    response.raise_for_status()
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > max_bytes:
            raise TargetRefused(f"response larger than {max_bytes} bytes (AGENTWATCH_SCRAPE_MAX_BYTES): cut off")
    return body.decode("utf-8", "replace")
