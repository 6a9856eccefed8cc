"""Signed packages: who wrote a package, checked before any of its code loads.

A package's SHA-256 hashes (manifest.json) prove it intact, not authentic: whoever can write
the file can recompute them, and loading a package runs its native code. A signed package
carries one more member, ``signature.json``, written last: the SHA-256 of every other member
(the manifest included) and an HMAC-SHA256 over that list under a key the signer and the
loader share. ``tilecraft.runtime.load(path, trust=KEYFILE)`` (``tilecraft run --trust``,
``tilecraft serve --trust``) then refuses an unsigned package, one signed with another key
and one with any member changed, added or removed, after unpacking and before anything is
parsed as a manifest or loaded with ``dlopen``.

Why HMAC-SHA256 and not a public-key signature: the runtime must work with the standard
library and numpy only (a device runs it without the compiler's dependencies), and the remote
server already authenticates clients with a shared HMAC key. The cost is that whoever can
verify can also sign: keep the key file as secret as the server's key (``tilecraft keygen``
writes it readable by its owner only).

A key file holds the key as hex (64 digits from ``tilecraft keygen`` or ``openssl rand -hex
32``); a file that is not hex is taken as raw bytes. At least 16 bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import secrets
import tarfile
from pathlib import Path
from typing import Iterable, Mapping

from ..errors import PackageError, PackageSignatureError

SIGNATURE = "signature.json"
SIGNATURE_FORMAT = "tilecraft-package-signature"
ALGORITHM = "hmac-sha256"
MIN_KEY_BYTES = 16
# The key's fingerprint (which key signed) is a hash of the key under this label, so it says
# nothing usable about the key itself.
_KEY_ID_LABEL = b"tilecraft package key id\n"


def read_key(key: "bytes | str | os.PathLike[str]") -> bytes:
    """The key bytes of a key file (a path), or ``key`` itself when given as bytes;
    :class:`PackageSignatureError` for a missing, unreadable or too short key."""
    if isinstance(key, (bytes, bytearray)):
        data = bytes(key)
    else:
        try:
            text = Path(key).read_bytes()
        except OSError as error:
            raise PackageSignatureError(f"cannot read the key file {key}: {error.strerror or error}") from None
        stripped = text.strip()
        try:
            data = bytes.fromhex(stripped.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            data = text
    if len(data) < MIN_KEY_BYTES:
        raise PackageSignatureError(f"the package key {'' if isinstance(key, (bytes, bytearray)) else str(key) + ' '}"
                                    f"has {len(data)} bytes; a key needs at least {MIN_KEY_BYTES} "
                                    "(`tilecraft keygen KEYFILE` writes one)")
    return data


def generate_key(path: "str | os.PathLike[str]") -> Path:
    """Write a new random 32-byte key (hex) to ``path``, readable by its owner only; refuses
    to overwrite a file (a key another machine trusts would be lost)."""
    path = Path(path)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise PackageSignatureError(f"{path} exists: not overwriting a key (remove it first)") from None
    except OSError as error:
        raise PackageSignatureError(f"cannot write the key file {path}: {error.strerror or error}") from None
    with os.fdopen(descriptor, "w") as stream:
        stream.write(secrets.token_hex(32) + "\n")
    return path


def key_id(key: bytes) -> str:
    """A short fingerprint naming the key in a signature (to tell 'another key' apart)."""
    return hashlib.sha256(_KEY_ID_LABEL + key).hexdigest()[:16]


def _mac(key: bytes, members: Mapping[str, str], archive: str) -> str:
    payload = json.dumps({"algorithm": ALGORITHM, "key_id": key_id(key), "members": dict(members),
                          "archive_sha256": archive}, sort_keys=True).encode()
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def signature_json(key: bytes, members: Mapping[str, str], archive: str) -> bytes:
    """The ``signature.json`` member: ``members`` (name -> SHA-256 hex) and ``archive``, the
    SHA-256 of the archive's bytes before this member (:func:`archive_prefix_sha256`), under
    one MAC. Canonical: the loader rebuilds it and compares every byte."""
    return (json.dumps({"format": SIGNATURE_FORMAT, "algorithm": ALGORITHM, "key_id": key_id(key),
                        "archive_sha256": archive, "members": dict(sorted(members.items())),
                        "mac": _mac(key, members, archive)}, indent=2) + "\n").encode()


def sign_package(path: "str | os.PathLike[str]", key: "bytes | str | os.PathLike[str]") -> Path:
    """Sign the package at ``path`` in place with ``key`` (a key file or bytes): its members
    as they are, then ``signature.json`` (an older signature is replaced)."""
    path, secret = Path(path), read_key(key)
    try:
        with tarfile.open(path, "r:*") as archive:
            members = [(m, archive.extractfile(m).read()) for m in archive.getmembers()
                       if m.isfile() and m.name != SIGNATURE]
    except (tarfile.TarError, OSError, EOFError) as error:
        raise PackageError(f"{path}: cannot sign: not a readable package ({error})") from None
    hashes = {member.name: hashlib.sha256(data).hexdigest() for member, data in members}
    partial = path.with_name(path.name + ".signing")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT, encoding="utf-8") as archive:
        for member, data in members:
            archive.addfile(member, io.BytesIO(data))
        archive.fileobj.flush()
        prefix = archive_prefix_sha256(partial, archive.offset)
        signature = signature_json(secret, hashes, prefix)
        archive.addfile(_signature_info(len(signature)), io.BytesIO(signature))
    partial.replace(path)
    return path


def _signature_info(size: int) -> tarfile.TarInfo:
    """The tar header of ``signature.json``: fixed fields (one ustar block, no extended
    header), so the loader can rebuild it and compare (the MAC cannot cover its own header)."""
    info = tarfile.TarInfo(SIGNATURE)
    info.size, info.mode, info.mtime = size, 0o644, 0
    return info


def _signature_header(size: int) -> bytes:
    return _signature_info(size).tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def archive_prefix_sha256(path: "str | os.PathLike[str]", size: int) -> str:
    """SHA-256 of the first ``size`` bytes of the file: every tar header, member and padding
    byte before ``signature.json``'s header."""
    digest, left = hashlib.sha256(), size
    with open(path, "rb") as stream:
        while left > 0:
            block = stream.read(min(left, 1 << 20))
            if not block:
                break
            digest.update(block)
            left -= len(block)
    return digest.hexdigest()


def check_signature(where: str, key: bytes, directory: Path, names: Iterable[str],
                    archive: "tarfile.TarFile") -> None:
    """Refuse the unpacked package in ``directory`` (members ``names``, unpacked from the open
    ``archive``) unless its last member ``signature.json`` is, byte for byte, the signature
    under ``key`` of exactly these members with exactly these contents and of every archive
    byte before it, and only zero blocks follow it. Reads bytes only: nothing is parsed as a
    manifest or loaded."""
    names = set(names)
    if SIGNATURE not in names:
        raise PackageSignatureError(f"{where}: the package is not signed, and a trusted key was given: "
                                    "refusing it (sign it with `tilecraft compile --sign KEYFILE` or "
                                    "`tilecraft sign`)")
    raw = (directory / SIGNATURE).read_bytes()
    try:
        signature = json.loads(raw)
        members, given_id = signature["members"], str(signature["key_id"])
        if signature.get("format") != SIGNATURE_FORMAT or not isinstance(members, dict) \
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in members.items()):
            raise ValueError("not a tilecraft package signature")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as error:
        raise PackageSignatureError(f"{where}: {SIGNATURE} is malformed ({error}): refusing the package") from None
    if signature.get("algorithm") != ALGORITHM:
        raise PackageSignatureError(f"{where}: signed with {str(signature.get('algorithm'))[:40]!r}; "
                                    f"this tilecraft checks {ALGORITHM}")
    if not hmac.compare_digest(given_id.encode(), key_id(key).encode()):
        raise PackageSignatureError(f"{where}: signed with another key (key id {given_id[:16]}, the trusted "
                                    f"key is {key_id(key)}): refusing the package")
    prefix = _prefix_digest(where, archive, len(raw))
    if not hmac.compare_digest(raw, signature_json(key, members, prefix)):
        raise PackageSignatureError(f"{where}: the signature does not cover this archive (its headers, "
                                    f"padding or {SIGNATURE} changed after signing): refusing the package")
    unpacked = names - {SIGNATURE}
    if unpacked != set(members):
        extra, missing = sorted(unpacked - set(members)), sorted(set(members) - unpacked)
        raise PackageSignatureError(f"{where}: the archive's members differ from the signed ones "
                                    f"(added: {extra}, removed: {missing}): refusing the package")
    for name in sorted(unpacked):
        digest = hashlib.sha256()
        with open(directory / name, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
        if not hmac.compare_digest(digest.hexdigest().encode(), members[name].encode()):
            raise PackageSignatureError(f"{where}: {name} is not the signed one (changed after signing): "
                                        "refusing the package")


def _prefix_digest(where: str, archive: "tarfile.TarFile", size: int) -> str:
    """SHA-256 of the archive's bytes before its last member, which must be ``signature.json``
    (of ``size`` bytes) under its canonical header, followed by nothing but zero bytes (its
    padding and the end-of-archive blocks)."""
    last = archive.getmembers()[-1]
    if last.name != SIGNATURE:
        raise PackageSignatureError(f"{where}: {SIGNATURE} is not the archive's last member "
                                    "(members were added after signing): refusing the package")
    stream = archive.fileobj
    stream.seek(0)
    digest, left = hashlib.sha256(), last.offset
    while left > 0:
        block = stream.read(min(left, 1 << 20))
        if not block:
            break
        digest.update(block)
        left -= len(block)
    header = stream.read(last.offset_data - last.offset)
    if header != _signature_header(size):
        raise PackageSignatureError(f"{where}: the tar header of {SIGNATURE} was changed after signing: "
                                    "refusing the package")
    stream.seek(last.offset_data + last.size)  # its padding, then the end-of-archive blocks
    for block in iter(lambda: stream.read(1 << 20), b""):
        if block.count(0) != len(block):
            raise PackageSignatureError(f"{where}: bytes after {SIGNATURE} are not the archive's end "
                                        "(added after signing): refusing the package")
    return digest.hexdigest()
