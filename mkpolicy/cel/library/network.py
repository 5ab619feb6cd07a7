"""Kubernetes' IP address and CIDR libraries (``ip``, ``cidr`` and their methods).

Parsing follows Go's ``net/netip`` as Kubernetes uses it: IPv4 octets without leading
zeros, IPv6 in any RFC 4291 text form, no zones (``fe80::1%eth0``), no IPv4-mapped
IPv6 addresses (``::ffff:1.2.3.4``). ``string()`` gives the canonical form (RFC 5952
for IPv6); a CIDR keeps the address as written (``cidr('10.0.0.1/8')`` is not masked
until ``.masked()``).
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library import function
from mkpolicy.cel.values import OpaqueValue, register_type

IP_TYPE = register_type("net.IP")
CIDR_TYPE = register_type("net.CIDR")

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_IPV4 = re.compile(r"(0|[1-9][0-9]{0,2})(\.(0|[1-9][0-9]{0,2})){3}")


class IP(OpaqueValue):
    """A ``net.IP`` value."""

    __slots__ = ("addr",)
    cel_type_name = "net.IP"

    def __init__(self, addr: _Address) -> None:
        self.addr = addr

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IP) and other.addr == self.addr

    def __hash__(self) -> int:
        return hash(("ip", self.addr))

    def __repr__(self) -> str:
        return f"ip({self.cel_string()!r})"

    def cel_string(self) -> str:
        return _canonical(self.addr)


class CIDR(OpaqueValue):
    """A ``net.CIDR`` value: an address and a prefix length (not necessarily masked)."""

    __slots__ = ("addr", "bits")
    cel_type_name = "net.CIDR"

    def __init__(self, addr: _Address, bits: int) -> None:
        self.addr = addr
        self.bits = bits

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CIDR) and other.addr == self.addr and other.bits == self.bits

    def __hash__(self) -> int:
        return hash(("cidr", self.addr, self.bits))

    def __repr__(self) -> str:
        return f"cidr({self.cel_string()!r})"

    def cel_string(self) -> str:
        return f"{_canonical(self.addr)}/{self.bits}"

    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        """The masked network."""
        return ipaddress.ip_network(f"{self.addr}/{self.bits}", strict=False)


def _canonical(addr: _Address) -> str:
    return addr.compressed


def parse_ip(text: str) -> _Address:
    """Parse an IP address as Kubernetes does; raise EvalError when it is not one."""
    if "%" in text:
        try:
            ipaddress.ip_address(text)
        except ValueError:
            pass
        else:
            raise EvalError(f"IP address {text!r} with zone value is not allowed")
    try:
        if "." in text and ":" not in text:
            if not _IPV4.fullmatch(text):
                raise ValueError("not a dotted-quad IPv4 address")
            addr: _Address = ipaddress.IPv4Address(text)
        else:
            addr = ipaddress.IPv6Address(text)
    except ValueError as exc:
        raise EvalError(f"IP Address {text!r} parse error during conversion from string: {exc}") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise EvalError(f"IPv4-mapped IPv6 address {text!r} is not allowed")
    return addr


def parse_cidr(text: str) -> CIDR:
    """Parse ``address/bits`` as Kubernetes does."""
    address, sep, bits_text = text.partition("/")
    if not sep or not re.fullmatch(r"0|[1-9][0-9]{0,2}", bits_text):
        raise EvalError(f"network address parse error during conversion from string: bad CIDR {text!r}")
    if "%" in address:
        raise EvalError(f"CIDR {text!r} with zone value is not allowed")
    try:
        addr = parse_ip(address)
    except EvalError as exc:
        if "IPv4-mapped" in exc.message:
            raise EvalError(f"IPv4-mapped IPv6 address {text!r} is not allowed") from None
        raise EvalError(f"network address parse error during conversion from string: {exc.message}") from None
    bits = int(bits_text)
    if bits > addr.max_prefixlen:
        raise EvalError(f"network address parse error during conversion from string: prefix length {bits} too large")
    return CIDR(addr, bits)


def _string_cost(result: Any, *args: Any) -> int:
    value = args[-1]
    return max(1, math.ceil(len(value) * 0.1)) if type(value) is str else 1


@function("ip", signatures=["(string) -> net.IP"], cost=_string_cost)
def to_ip(value: Any) -> IP:
    if type(value) is str:
        return IP(parse_ip(value))
    raise no_overload("ip", value)


@function("ip", signatures=["(net.CIDR) -> net.IP"], receiver=True)
def cidr_ip(value: Any) -> IP:
    if type(value) is CIDR:
        return IP(value.addr)
    raise no_overload("ip", value)


@function("isIP", signatures=["(string) -> bool"], cost=_string_cost)
def is_ip(value: Any) -> bool:
    if type(value) is not str:
        raise no_overload("isIP", value)
    try:
        parse_ip(value)
    except EvalError:
        return False
    return True


@function("ip.isCanonical", signatures=["(string) -> bool"], cost=lambda r, v: 2 * _string_cost(r, v))
def ip_is_canonical(value: Any) -> bool:
    if type(value) is not str:
        raise no_overload("ip.isCanonical", value)
    return _canonical(parse_ip(value)) == value


def _ip(name: str, value: Any) -> _Address:
    if type(value) is not IP:
        raise no_overload(name, value)
    return value.addr


@function("family", signatures=["(net.IP) -> int"], receiver=True)
def family(value: Any) -> int:
    return _ip("family", value).version


@function("isUnspecified", signatures=["(net.IP) -> bool"], receiver=True)
def is_unspecified(value: Any) -> bool:
    return _ip("isUnspecified", value).is_unspecified


@function("isLoopback", signatures=["(net.IP) -> bool"], receiver=True)
def is_loopback(value: Any) -> bool:
    return _ip("isLoopback", value).is_loopback


_V4_LINK_LOCAL_MULTICAST = ipaddress.ip_network("224.0.0.0/24")
_V6_LINK_LOCAL_MULTICAST = ipaddress.ip_network("ff02::/16")


@function("isLinkLocalMulticast", signatures=["(net.IP) -> bool"], receiver=True)
def is_link_local_multicast(value: Any) -> bool:
    addr = _ip("isLinkLocalMulticast", value)
    if addr.version == 4:
        return addr in _V4_LINK_LOCAL_MULTICAST
    return addr in _V6_LINK_LOCAL_MULTICAST


@function("isLinkLocalUnicast", signatures=["(net.IP) -> bool"], receiver=True)
def is_link_local_unicast(value: Any) -> bool:
    return _ip("isLinkLocalUnicast", value).is_link_local


_V4_BROADCAST = ipaddress.IPv4Address("255.255.255.255")


@function("isGlobalUnicast", signatures=["(net.IP) -> bool"], receiver=True)
def is_global_unicast(value: Any) -> bool:
    """Go's netip.Addr.IsGlobalUnicast: private ranges count as global unicast."""
    addr = _ip("isGlobalUnicast", value)
    if addr == _V4_BROADCAST:
        return False
    return not (addr.is_unspecified or addr.is_loopback or addr.is_multicast or addr.is_link_local)


@function("cidr", signatures=["(string) -> net.CIDR"], cost=_string_cost)
def to_cidr(value: Any) -> CIDR:
    if type(value) is not str:
        raise no_overload("cidr", value)
    return parse_cidr(value)


@function("isCIDR", signatures=["(string) -> bool"], cost=_string_cost)
def is_cidr(value: Any) -> bool:
    if type(value) is not str:
        raise no_overload("isCIDR", value)
    try:
        parse_cidr(value)
    except EvalError:
        return False
    return True


def _cidr(name: str, value: Any, *rest: Any) -> CIDR:
    if type(value) is not CIDR:
        raise no_overload(name, value, *rest)
    return value


@function(
    "containsIP",
    signatures=["(net.CIDR, net.IP) -> bool", "(net.CIDR, string) -> bool"],
    receiver=True,
    cost=lambda r, c, other: 4 + (_string_cost(r, other) if type(other) is str else 0),
)
def contains_ip(cidr: Any, other: Any) -> bool:
    c = _cidr("containsIP", cidr, other)
    if type(other) is str:
        addr = parse_ip(other)
    elif type(other) is IP:
        addr = other.addr
    else:
        raise no_overload("containsIP", cidr, other)
    if addr.version != c.addr.version:
        return False
    return addr in c.network()


@function(
    "containsCIDR",
    signatures=["(net.CIDR, net.CIDR) -> bool", "(net.CIDR, string) -> bool"],
    receiver=True,
    cost=lambda r, c, other: 7 + (_string_cost(r, other) if type(other) is str else 0),
)
def contains_cidr(cidr: Any, other: Any) -> bool:
    c = _cidr("containsCIDR", cidr, other)
    if type(other) is str:
        o = parse_cidr(other)
    elif type(other) is CIDR:
        o = other
    else:
        raise no_overload("containsCIDR", cidr, other)
    if o.addr.version != c.addr.version or c.bits > o.bits:
        return False
    return o.addr in c.network()


@function("prefixLength", signatures=["(net.CIDR) -> int"], receiver=True)
def prefix_length(value: Any) -> int:
    return _cidr("prefixLength", value).bits


@function("masked", signatures=["(net.CIDR) -> net.CIDR"], receiver=True)
def masked(value: Any) -> CIDR:
    c = _cidr("masked", value)
    return CIDR(c.network().network_address, c.bits)
