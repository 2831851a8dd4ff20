"""The control plane's certificate authority and what it signs, written as kubeadm lays them out:
one CA (its key kept, so that nodes joining later get credentials from it), the API server's
serving certificate, the service-account signing key pair, and a client certificate in a
kubeconfig per identity (the admin in system:masters, kube-controller-manager, kube-scheduler;
each node's kubelet as system:node:<name> in system:nodes, as the Node authorizer expects; kube-proxy).

Keys are ECDSA P-256 (the service-account key RSA 2048, as kube-apiserver's default); every
certificate is valid for 30 days from five minutes ago. Private keys are written mode 0600.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CONTEXT = "netqos-e2e"  # the cluster, user and context name of every kubeconfig written here
# The identities of the control plane's own components and the admin: user name and groups.
IDENTITIES: dict[str, tuple[str, list[str]]] = {
    "admin": ("admin", ["system:masters"]),
    "kube-controller-manager": ("system:kube-controller-manager", []),
    "netqos-scheduler": ("system:kube-scheduler", []),
}


def control_plane(pki: Path, server: str, hosts: Sequence[str]) -> dict[str, Path]:
    """A new CA in `pki` and everything the control plane needs from it, the API server's serving
    certificate valid for `hosts` (addresses or DNS names). The files by name: ca.crt, ca.key,
    apiserver.crt/.key, sa.key/.pub and `<identity>.kubeconfig` for each of `IDENTITIES` (written
    beside `pki`: the admin's as `kubeconfig`, the others as `<identity>.kubeconfig`)."""
    ca = _ca()
    ca_pem = ca[0].public_bytes(serialization.Encoding.PEM)
    files = {"ca.crt": write(pki / "ca.crt", ca_pem)}
    # kept, as kubeadm keeps it: the nodes' kubelet and kube-proxy certificates are signed with it
    files["ca.key"] = write(pki / "ca.key", _key_pem(ca[1]), 0o600)
    serving = _issue(ca, "kube-apiserver", hosts=hosts)
    files["apiserver.crt"] = write(pki / "apiserver.crt", serving.cert)
    files["apiserver.key"] = write(pki / "apiserver.key", serving.key, 0o600)
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files["sa.key"] = write(pki / "sa.key", _key_pem(sa), 0o600)
    public = sa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    files["sa.pub"] = write(pki / "sa.pub", public)
    for name, (user, groups) in IDENTITIES.items():
        client = _issue(ca, user, groups)
        if name == "admin":
            write(pki / "admin.crt", client.cert)
            write(pki / "admin.key", client.key, 0o600)
        path = pki.parent / ("kubeconfig" if name == "admin" else f"{name}.kubeconfig")
        files[f"{name}.kubeconfig"] = write(path, _kubeconfig(server, ca_pem, client), 0o600)
    return files


def node_credentials(pki: Path, server: str, nodes: Sequence[str]) -> tuple[dict[str, Path], Path]:
    """Kubeconfigs signed by the CA `control_plane` wrote into `pki`, for the API server at `server`:
    one per node's kubelet (by node name) and kube-proxy's (system:kube-proxy, bound to
    system:node-proxier by default)."""
    ca_cert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{pki / 'ca.key'} is not the ECDSA key control_plane() writes")
    ca = (ca_cert, ca_key)
    ca_pem = (pki / "ca.crt").read_bytes()
    kubelets = {}
    for name in nodes:
        # as the Node authorizer expects: user system:node:<name> in group system:nodes
        client = _issue(ca, f"system:node:{name}", ["system:nodes"])
        kubelets[name] = write(pki / f"kubelet-{name}.kubeconfig", _kubeconfig(server, ca_pem, client), 0o600)
    proxy = _issue(ca, "system:kube-proxy")
    return kubelets, write(pki / "kube-proxy.kubeconfig", _kubeconfig(server, ca_pem, proxy), 0o600)


@dataclass(frozen=True)
class _Issued:
    cert: bytes
    key: bytes


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _ca() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    name = _name("netqos-e2e-ca")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _issue(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    common_name: str,
    organizations: Sequence[str] = (),
    hosts: Sequence[str] = (),
) -> _Issued:
    """A certificate from `ca`: a server certificate when `hosts` are given, else a client one."""
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if hosts else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organizations))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if hosts:
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return _Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def write(path: Path, data: bytes | str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    path.chmod(mode)
    return path


def _kubeconfig(server: str, ca: bytes, client: _Issued) -> str:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": server, "certificate-authority-data": b64(ca)}}],
        "users": [
            {"name": CONTEXT, "user": {"client-certificate-data": b64(client.cert), "client-key-data": b64(client.key)}}
        ],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT}}],
        "current-context": CONTEXT,
    }
    return json.dumps(config, indent=2)
