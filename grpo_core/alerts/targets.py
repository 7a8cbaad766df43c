"""Where a webhook may POST: an ``http(s)`` URL on a public address, never this machine or a private network unless
an admin allows the host, never the dashboard itself; a redirect is not followed.

A run's ``webhook_url`` is text a login wrote, and the dashboard POSTs to it from the server: without these checks a
login could make the server call a loopback service, a cloud metadata address (``169.254.169.254``), a private
network, or the dashboard's own API, and read the answer's status on the run's card (server-side request forgery).

:func:`check_destination` parses the URL with httpx (the parser that also sends it), resolves the host once
(``getaddrinfo``, which also reads ``2130706433``, ``0x7f.1`` and ``127.1`` as ``127.0.0.1``) and refuses when *any*
address it resolves to is loopback, link-local, private, multicast, unspecified, reserved, shared (``100.64/10``) or
otherwise not globally routable, an IPv6 address carrying one of those (``::ffff:127.0.0.1``, NAT64
``64:ff9b::/96``, 6to4), or an address of this machine. :func:`post_json` then connects to the address it validated,
not to the name (a DNS answer that changes between check and connect cannot reach another host): the URL's host is
replaced by that address, the ``Host`` header and TLS's SNI and certificate check keep the name (httpx's
``sni_hostname`` extension, as safehttpx does). Environment proxies are not used. The answer's body is never read
and never shown; a refusal says why and which setting would allow it.

Who may set a run's own ``webhook_url`` (:class:`WebhookPolicy`, ``--run-webhooks``): ``all`` logins, ``admins``
only, or ``none``; the default is ``all`` without logins (single-user: as before) and ``admins`` with several
logins. The dashboard's ``--webhook-url`` is the admin's choice: its host counts as allowed.

safehttpx (Gradio's dependency) was not used: it only GETs, asynchronously, falls back to a public DNS resolver over
the internet, and accepts a host as soon as one of its addresses is public. Imports no torch.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import httpx

#: Who may set a run's own ``webhook_url`` (``--run-webhooks``).
RUN_WEBHOOKS = ("all", "admins", "none")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Sequence[str]]


class WebhookRefused(ValueError):
    """A webhook URL refused before anything was sent; the message says why and which setting would allow it."""


class WebhookDeliveryError(OSError):
    """A POST that was sent (or tried) and failed: no connection, a timeout, a redirect or a non-2xx answer."""


def normalize_host(host: str) -> str:
    """A host as compared: lower case, without a final dot or IPv6 brackets."""
    return host.strip().lower().strip("[]").rstrip(".")


def parse_allowed_host(text: str) -> str | ipaddress.IPv4Network | ipaddress.IPv6Network:
    """One ``--webhook-allow-host`` entry: a host name (matched as written in the URL), an IP address or a network
    in CIDR notation (``10.0.0.0/8``: any address in it).

    Raises:
        ValueError: empty, or neither a name nor an address nor a network.
    """
    entry = normalize_host(text)
    if not entry:
        raise ValueError("--webhook-allow-host: empty host")
    try:
        return ipaddress.ip_network(entry, strict=False)
    except ValueError:
        pass
    if "/" in entry or any(c in entry for c in " @:?#\\"):
        raise ValueError(f"--webhook-allow-host: {text!r} is not a host name, an IP address or a CIDR network")
    return entry


@dataclass(frozen=True)
class WebhookPolicy:
    """What the dashboard allows webhooks to reach.

    Attributes:
        allow_hosts: host names, addresses and networks an admin allows although internal (``--webhook-allow-host``).
        run_webhooks: who may set a run's own ``webhook_url``: ``"all"``, ``"admins"`` or ``"none"``.
        dashboard_port: the dashboard's port: this machine on that port is refused even when its host is allowed.
    """

    allow_hosts: tuple[str, ...] = ()
    run_webhooks: str = "all"
    dashboard_port: int | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> WebhookPolicy:
        """The policy of a :class:`grpo_core.settings.Settings`: its allowed hosts plus the host of its own
        ``webhook_url``; ``run_webhooks`` empty means ``all`` without logins and ``admins`` with them."""
        hosts = list(settings.webhook_allow_hosts)
        if settings.webhook_url:
            try:
                hosts.append(normalize_host(httpx.URL(settings.webhook_url).host))
            except (httpx.InvalidURL, ValueError):
                pass  # refused when used, with the reason
        who = settings.run_webhooks or ("admins" if settings.auth else "all")
        return cls(allow_hosts=tuple(h for h in hosts if h), run_webhooks=who, dashboard_port=settings.port)

    def allows_name(self, host: str) -> bool:
        return normalize_host(host) in {h for h in map(parse_allowed_host, self.allow_hosts) if isinstance(h, str)}

    def allows_address(self, ip: IpAddress) -> bool:
        return any(not isinstance(entry, str) and ip.version == entry.version and ip in entry
                   for entry in map(parse_allowed_host, self.allow_hosts))


def may_set_run_webhook(policy: WebhookPolicy, owner: str | None, admins: Iterable[str]) -> bool:
    """Whether a run owned by login ``owner`` (``None``: single-user or before logins) may use its own URL."""
    if policy.run_webhooks == "all":
        return True
    if policy.run_webhooks == "admins":
        return owner is None or owner in set(admins)
    return False


def address_problem(ip: IpAddress) -> str | None:
    """Why ``ip`` is not a webhook destination (``"a loopback address"``, ...), or ``None`` when it is public.

    An IPv6 address that carries an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::a.b.c.d``, 6to4
    ``2002:AABB:CCDD::``) is judged by the IPv4 address too.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        carried = ip.ipv4_mapped or ip.sixtofour or (
            ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None)
        if carried is not None:
            problem = address_problem(carried)
            if problem:
                return f"{problem} ({carried}) inside an IPv6 address"
    for test, name in (("is_unspecified", "an unspecified address"), ("is_loopback", "a loopback address"),
                       ("is_link_local", "a link-local address"), ("is_multicast", "a multicast address"),
                       ("is_private", "a private-network address"), ("is_reserved", "a reserved address")):
        if getattr(ip, test):
            return name
    if not ip.is_global:
        return "not a public address (shared or special-purpose range)"
    return None


@lru_cache(maxsize=1)
def _machine_addresses() -> frozenset[IpAddress]:
    """Every address of this machine's network interfaces (psutil), read once."""
    import psutil

    found = set()
    for addresses in psutil.net_if_addrs().values():
        for entry in addresses:
            try:
                found.add(ipaddress.ip_address(entry.address.split("%")[0]))
            except ValueError:
                continue  # a MAC address
    return frozenset(found)


def _system_resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise WebhookDeliveryError(f"cannot resolve {host}: {exc}") from None
    return [info[4][0] for info in infos if info[0] in (socket.AF_INET, socket.AF_INET6)]


@dataclass(frozen=True)
class Destination:
    """A checked webhook URL: ``url`` as parsed, ``addresses`` every address its host resolved to, all checked, in
    the resolver's order of preference (empty when not resolved)."""

    url: httpx.URL
    host: str
    port: int
    addresses: tuple[IpAddress, ...] = ()

    @property
    def address(self) -> IpAddress | None:
        """The first address to connect to (``None`` when not resolved)."""
        return self.addresses[0] if self.addresses else None


def url_in_public_text(text: str, url: str) -> str:
    """``text`` with ``url`` (as written, or as ``repr`` quotes it) replaced by its scheme, host and port
    (``https://hooks.slack.com/…``): for a message every login reads (a run's ``alert_error`` on its status card),
    since a webhook's path, query or user info is its owner's credential (a Slack incoming webhook's path).
    A URL that does not parse is named ``(the webhook URL)``."""
    raw = str(url or "")
    try:
        parsed = httpx.URL(raw.strip())
        netloc = parsed.netloc.decode("ascii")  # host[:port], without the user info
        shown = f"{parsed.scheme}://{netloc}/…" if parsed.scheme and parsed.host else "(the webhook URL)"
    except (httpx.InvalidURL, ValueError, UnicodeError):
        shown = "(the webhook URL)"
    forms = {raw, raw.strip(), repr(raw), repr(raw.strip())} - {"", "''"}
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, shown)
    return text


def parse_webhook_url(url: str) -> httpx.URL:
    """``url`` parsed by httpx, refused unless ``http``/``https`` with a host.

    Raises:
        WebhookRefused: another scheme, no host, or not a URL.
    """
    text = (url or "").strip()
    try:
        parsed = httpx.URL(text)
    except (httpx.InvalidURL, ValueError) as exc:
        raise WebhookRefused(f"webhook URL {text!r} is not a valid URL ({exc})") from None
    if parsed.scheme not in ("http", "https"):
        raise WebhookRefused(f"webhook URL {text!r}: only http and https URLs are allowed")
    if not parsed.host:
        raise WebhookRefused(f"webhook URL {text!r} has no host")
    return parsed


def _literal_address(host: str) -> IpAddress | None:
    """The address a host written as a number stands for, read locally without DNS: dotted, IPv6, and the legacy
    IPv4 spellings ``inet_aton`` accepts (``2130706433``, ``0x7f.1``, ``127.1``, ``0177.0.0.1``)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, UnicodeError, ValueError):
        return None


def check_destination(url: str, policy: WebhookPolicy, *, resolve: bool = True,
                      resolver: Resolver = _system_resolve) -> Destination:
    """Check ``url`` against ``policy``; with ``resolve``, resolve its host and pick the address to connect to.

    Without ``resolve`` (a launch, where a name that does not resolve yet is no reason to refuse) only a host
    written as an address or a loopback name is judged; the delivery checks again with ``resolve``.

    Raises:
        WebhookRefused: not http(s), no host, or (any address of) the host is internal or this machine and not
            allowed; the dashboard itself, always.
        WebhookDeliveryError: the host does not resolve.
    """
    parsed = parse_webhook_url(url)
    host = normalize_host(parsed.host)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    shown = f"webhook URL {url.strip()!r}"
    name_allowed = policy.allows_name(host)
    literal = _literal_address(host)
    if literal is None and (host in _LOOPBACK_NAMES or host.endswith(".localhost")) and not name_allowed:
        raise WebhookRefused(f"{shown}: {host} is this machine (a loopback name); an admin may allow it with "
                             f"--webhook-allow-host {host}")
    if literal is not None:
        addresses = [literal]
    elif resolve:
        addresses = []
        for text in resolver(host, port):
            try:
                addresses.append(ipaddress.ip_address(text.split("%")[0]))
            except ValueError:
                continue
        if not addresses:
            raise WebhookDeliveryError(f"{shown}: {host} resolves to no address")
    else:
        return Destination(parsed, host, port)
    machine = _machine_addresses()
    for ip in addresses:
        same = ip.ipv4_mapped or ip if isinstance(ip, ipaddress.IPv6Address) else ip  # ::ffff:a.b.c.d is a.b.c.d
        if (same in machine or same.is_loopback or same.is_unspecified) and port == policy.dashboard_port:
            raise WebhookRefused(f"{shown}: {host} port {port} is the dashboard itself; webhooks never call it")
        if name_allowed or policy.allows_address(same):
            continue
        problem = address_problem(ip)
        if problem is None and same in machine:
            problem = "an address of this machine"
        if problem:
            if str(ip) == host:
                where = host
            else:
                where = f"{host} {'means' if literal is not None else 'resolves to'} {ip}, which"
            allowed_as = ip if literal is not None else host
            raise WebhookRefused(f"{shown}: {where} is {problem}; an admin may allow it with --webhook-allow-host "
                                 f"{allowed_as}")
    return Destination(parsed, host, port, tuple(dict.fromkeys(addresses)))


def post_json(url: str, body: dict[str, Any], policy: WebhookPolicy, *, timeout_s: float = 10.0,
              resolver: Resolver = _system_resolve) -> None:
    """POST ``body`` as JSON to ``url`` after :func:`check_destination`, connecting to the address checked.

    The answer's status is all that is read: 2xx is success; a redirect is not followed.

    Raises:
        WebhookRefused: as :func:`check_destination` (nothing is sent).
        WebhookDeliveryError: no connection, a timeout, a redirect or a status other than 2xx.
    """
    destination = check_destination(url, policy, resolver=resolver)
    headers = {"Content-Type": "application/json", "User-Agent": "grpo-dashboard",
               "Host": destination.url.netloc.decode("ascii")}  # name[:port], without the userinfo
    extensions = {"sni_hostname": destination.url.host} if destination.url.scheme == "https" else {}
    response = None
    with httpx.Client(trust_env=False, follow_redirects=False, timeout=timeout_s) as client:
        for index, address in enumerate(destination.addresses):  # the next checked address if one cannot connect
            request = client.build_request("POST", destination.url.copy_with(host=str(address)), json=body,
                                           headers=headers, extensions=extensions)
            try:
                response = client.send(request, stream=True)
            except httpx.ConnectError as exc:
                if index + 1 < len(destination.addresses):
                    continue
                raise WebhookDeliveryError(f"ConnectError: {exc}") from None
            except httpx.HTTPError as exc:
                raise WebhookDeliveryError(f"{exc.__class__.__name__}: {exc}") from None
            response.close()  # the body is never read
            break
    assert response is not None  # check_destination resolved at least one address
    if response.is_redirect:
        raise WebhookDeliveryError(f"the webhook answered with a redirect (HTTP {response.status_code}); "
                                   "redirects are not followed: give the final URL")
    if not response.is_success:
        raise WebhookDeliveryError(f"the webhook answered HTTP {response.status_code}")


def check_launch_webhooks(urls: Iterable[Any], policy: WebhookPolicy, *, user: str | None, is_admin: bool) -> None:
    """Refuse a launch whose ``webhook_url`` (each of ``urls``: a run's, or a sweep's values) login ``user`` may not
    set, or that is not http(s) or names an internal host as an address or a loopback name (names are resolved
    only when a message is sent, and checked again then).

    Raises:
        WebhookRefused: the message starts with ``webhook_url:`` and says why.
    """
    for url in urls:
        text = str(url or "").strip()
        if not text:
            continue
        if not may_set_run_webhook(policy, user, {user} if is_admin and user else ()):
            who = "no login" if policy.run_webhooks == "none" else "only admins"
            raise WebhookRefused(f"webhook_url: on this dashboard {who} may set a run's own webhook_url "
                                 f"(--run-webhooks {policy.run_webhooks}); leave it empty and the dashboard's "
                                 "--webhook-url, if any, gets the run's messages")
        try:
            check_destination(text, policy, resolve=False)
        except WebhookRefused as exc:
            raise WebhookRefused(f"webhook_url: {exc}") from None
