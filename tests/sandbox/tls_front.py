"""TLS in front of a private Podman service, for tests (the service itself speaks plain HTTP).

`write_engine_certs` makes one engine's material with the `cryptography` package: its own CA,
a server certificate for 127.0.0.1 (and any other address asked for) signed by it, and a
client certificate in Docker's layout (ca.pem, cert.pem, key.pem: what `cert_path` names).
`TlsFront` listens on 127.0.0.1 (or another address of this machine: an engine the backend
takes for another machine's), terminates TLS, requires a client certificate of the same CA (as
`dockerd --tlsverify` does) and relays the plain HTTP to the service's unix socket, keeping
the head of what each client sent when asked (`requests`); one thread per connection, which
alone reads and writes its TLS socket (an SSL object is not shared between threads).
"""

from __future__ import annotations

import datetime
import ipaddress
import select
import socket
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _issue(
    cn: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    usage: x509.ObjectIdentifier | None,
    addresses: tuple[str, ...] = ("127.0.0.1",),
) -> x509.Certificate:
    """A one-day certificate for `cn` signed by `issuer_key`; a CA when `usage` is None."""
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=usage is None, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), False
        )
    )
    if usage is None:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), False)
    if usage == ExtendedKeyUsageOID.SERVER_AUTH:
        names: list[x509.GeneralName] = [x509.DNSName("localhost")]
        names += [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        key_path = path.with_name(path.name.replace("cert", "key"))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )


def write_engine_certs(
    dest: Path, engine: str, addresses: tuple[str, ...] = ("127.0.0.1",)
) -> Path:
    """`dest` with a new CA (ca.pem), a client certificate and key it signed (cert.pem,
    key.pem) and the engine's server certificate and key (server-cert.pem, server-key.pem)
    for `addresses`."""
    dest.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _issue(f"{engine} CA", ca_key, _name(f"{engine} CA"), ca_key, None)
    _write(dest / "ca.pem", ca, None)
    for file, usage in (("cert.pem", ExtendedKeyUsageOID.CLIENT_AUTH),
                        ("server-cert.pem", ExtendedKeyUsageOID.SERVER_AUTH)):  # fmt: skip
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _issue(f"{engine} {file}", key, ca.subject, ca_key, usage, addresses)
        _write(dest / file, cert, key)
    return dest


def non_loopback_address() -> str | None:
    """An address of this machine that is not a loopback one (the source of its default
    route; no packet is sent), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("198.51.100.1", 9))  # TEST-NET-2: only the route is looked up
            address = str(s.getsockname()[0])
        except OSError:
            return None
    return None if ipaddress.ip_address(address).is_loopback else address


class TlsFront:
    """tcp://<address>:<port> with TLS (the certificates of `cert_dir`, clients checked
    against its ca.pem) relayed to the unix socket `upstream`. With `record`, the first
    RECORD_BYTES of every chunk a client sends are kept in `requests`. Use start/stop."""

    RECORD_BYTES = 16384

    def __init__(
        self, cert_dir: Path, upstream: Path, address: str = "127.0.0.1", record: bool = False
    ) -> None:
        self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ctx.load_cert_chain(cert_dir / "server-cert.pem", cert_dir / "server-key.pem")
        self._ctx.load_verify_locations(cert_dir / "ca.pem")
        self._ctx.verify_mode = ssl.CERT_REQUIRED
        self._upstream = str(upstream)
        self._listener = socket.create_server((address, 0))
        self.url = f"tcp://{address}:{self._listener.getsockname()[1]}"
        self._record = record
        self.requests: list[bytes] = []
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._spawn(self._accept)

    def stop(self) -> None:
        self._stopping.set()
        for t in self._threads:
            t.join(timeout=5)
        self._listener.close()

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(t)
        t.start()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            if select.select([self._listener], [], [], 0.2)[0]:
                conn, _ = self._listener.accept()
                self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(10)
            tls = self._ctx.wrap_socket(conn, server_side=True)  # the handshake
            tls.settimeout(None)
        except OSError:  # ssl.SSLError: a client without this CA's certificate
            conn.close()
            return
        upstream = socket.socket(socket.AF_UNIX)
        try:
            upstream.connect(self._upstream)
            self._relay(tls, upstream)
        except OSError:
            pass  # either side went away
        finally:
            upstream.close()
            tls.close()

    def _relay(self, tls: ssl.SSLSocket, upstream: socket.socket) -> None:
        while not self._stopping.is_set():
            for sock in select.select([tls, upstream], [], [], 0.2)[0]:
                data = sock.recv(1 << 16)
                while sock is tls and tls.pending():  # decrypted, but invisible to select
                    data += tls.recv(tls.pending())
                if not data:
                    return
                if sock is tls and self._record:
                    self.requests.append(data[: self.RECORD_BYTES])
                (upstream if sock is tls else tls).sendall(data)
