"""Whether a server's TLS certificate is one a live site would serve: validity period,
self-signed, host name. An invalid one is a ``dead`` signal (the runtime counts it only for a
page that was not useful).

Reads the certificate types Scrapy's download handlers give (Twisted, pyOpenSSL, DER bytes,
``cryptography``) through ``cryptography``, imported at the first certificate.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from scrapy_domainstate.core.record import Outcome
from scrapy_domainstate.detect.verdict import Verdict

__all__ = ["CERT_NOT_BEFORE_GRACE", "certificate_verdict"]

#: Grace for a certificate's ``notBefore`` against a slightly slow local clock.
CERT_NOT_BEFORE_GRACE = 3600.0


def certificate_verdict(cert: Any, hostname: str, now: float) -> Verdict | None:
    """A ``dead`` verdict for an invalid server certificate, else ``None``.

    ``cert`` is ``response.certificate``: a ``twisted.internet.ssl.Certificate`` (the
    Twisted handler), DER bytes (the httpx/aiohttp handlers), a pyOpenSSL ``X509`` or a
    ``cryptography`` certificate. Checks, in order: validity period (``'tls:expired'``,
    also for not-yet-valid beyond :data:`CERT_NOT_BEFORE_GRACE`), self-signed
    (``'tls:self-signed'``), and the host name against the SAN DNS names (one-label
    wildcards), the CN when there is no SAN DNS name, and SAN IP addresses for IP hosts
    (``'tls:hostname'``). ``None`` also for ``None`` or anything unreadable.
    """
    if cert is None:
        return None
    try:
        x509 = _to_x509(cert)
        if x509 is None:
            return None
        not_before, not_after = _cert_times(x509)
        if now > not_after or now + CERT_NOT_BEFORE_GRACE < not_before:
            return Verdict(Outcome.DEAD, None, "tls:expired")
        if _self_signed(x509):
            return Verdict(Outcome.DEAD, None, "tls:self-signed")
        if hostname and not _host_matches(x509, hostname):
            return Verdict(Outcome.DEAD, None, "tls:hostname")
    except Exception:
        return None
    return None


def _to_x509(cert: Any) -> Any:
    from cryptography import x509

    if isinstance(cert, x509.Certificate):
        return cert
    original = getattr(cert, "original", None)  # twisted.internet.ssl.Certificate
    if original is not None and hasattr(original, "to_cryptography"):
        return original.to_cryptography()
    if hasattr(cert, "to_cryptography"):  # OpenSSL.crypto.X509
        return cert.to_cryptography()
    if isinstance(cert, (bytes, bytearray, memoryview)):  # DER from the httpx/aiohttp handlers
        data = bytes(cert)
        if data.lstrip().startswith(b"-----BEGIN"):
            return x509.load_pem_x509_certificate(data)
        return x509.load_der_x509_certificate(data)
    return None


def _cert_times(cert: Any) -> tuple[float, float]:
    try:
        return cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()
    except AttributeError:  # cryptography < 42
        from datetime import timezone

        return (
            cert.not_valid_before.replace(tzinfo=timezone.utc).timestamp(),
            cert.not_valid_after.replace(tzinfo=timezone.utc).timestamp(),
        )


def _self_signed(cert: Any) -> bool:
    if cert.issuer != cert.subject:
        return False
    verify = getattr(cert, "verify_directly_issued_by", None)
    if verify is None:
        return True
    try:
        verify(cert)
    except (ValueError, TypeError) as exc:
        # ValueError/InvalidSignature: the name matches but its own key did not sign it
        # (a CA reusing its name); TypeError: a key type that cannot be checked here.
        return isinstance(exc, TypeError)
    except Exception:
        return False
    return True


def _ascii_host(host: str) -> str:
    host = host.strip().rstrip(".").lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def _dns_name_matches(pattern: str, host: str) -> bool:
    pattern = pattern.strip().rstrip(".").lower()
    if not pattern:
        return False
    if pattern == host:
        return True
    if pattern.startswith("*.") and pattern.count(".") >= 2:
        suffix = pattern[1:]
        label = host[: -len(suffix)]
        return host.endswith(suffix) and bool(label) and "." not in label
    return False


def _host_matches(cert: Any, hostname: str) -> bool:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    host = _ascii_host(hostname)
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        san = None
    if ip is not None:
        if san is not None and ip in san.get_values_for_type(x509.IPAddress):
            return True
        names = san.get_values_for_type(x509.DNSName) if san is not None else []
        return host in (n.lower() for n in names)
    if san is not None:
        names = san.get_values_for_type(x509.DNSName)
        if names:
            return any(_dns_name_matches(name, host) for name in names)
    common_names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return any(_dns_name_matches(str(cn.value), host) for cn in common_names)
