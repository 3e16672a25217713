"""Placeholder Google Cloud credentials, so a Vertex AI client starts with no real ones.

`google-genai` (`vertexai=True`) and `anthropic`'s `AnthropicVertex` authenticate with
Application Default Credentials: `google.auth.default()` reads the file that
GOOGLE_APPLICATION_CREDENTIALS names, ahead of any other source, and the clients send its
access token as `Authorization: Bearer`. The agent must hold no real credential, and must
start offline (in the loopback-only namespace too), so flowproof points that variable at a
file of its own: a service account whose key was made on this machine (kept in the user's
cache folder) and that belongs to no project.

Why it needs no network: AnthropicVertex refreshes the credentials as it loads them, and a
refresh normally posts to Google's token endpoint. A service account outside Google's
default universe (`universe_domain` below) instead signs its own token (a self-signed JWT,
google-auth >= 2.23): the refresh is local. The proxy drops that token with every other
client credential; at record it sends FLOWPROOF_KEY_VERTEX instead.

The file names no project: the agent names its own (`project=`/`location=`, or
ANTHROPIC_VERTEX_PROJECT_ID / CLOUD_ML_REGION), as the request path carries them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from pathlib import Path

from flowproof_cli.process import write_atomic

#: The variable google-auth reads first.
CREDENTIALS_VARIABLE = "GOOGLE_APPLICATION_CREDENTIALS"
#: The file's name in the flow's private folder (beside the task file).
CREDENTIALS_FILE = "google-placeholder-credentials.json"
#: A universe no Google service lives in: credentials there sign their own tokens.
PLACEHOLDER_UNIVERSE = "flowproof.invalid"
PLACEHOLDER_ACCOUNT = "flowproof-placeholder@flowproof.invalid"
#: Bits of the placeholder key: google-auth signs with RSA only. The key guards nothing, so
#: the smallest size OpenSSL still signs with (1024 bits: 0.02 s to make, 2048: 0.09 s).
_KEY_BITS = 1024
#: Where the key is kept between runs, under the user's cache folder: making it (and
#: importing `cryptography` to do so) cost every flow about 0.05 s before its agent started.
_KEY_FILE = os.path.join("flowproof", "google-placeholder-key.pem")
_PEM_HEAD = "-----BEGIN PRIVATE KEY-----"


@functools.cache
def _private_key_pem() -> str:
    """The placeholder RSA key: the cached one, else a new one (cached when the cache folder
    can be written). It signs nothing anyone checks, so one per user is as good as one per
    run."""
    path = os.path.join(_cache_folder(), _KEY_FILE)
    try:
        with open(path, encoding="ascii") as cached:
            pem = cached.read()
        if pem.startswith(_PEM_HEAD):
            return pem
    except (OSError, ValueError):
        pass
    pem = _new_key_pem()
    with contextlib.suppress(OSError):
        _keep(path, pem)
    return pem


def _cache_folder() -> str:
    return os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")


def _keep(path: str, pem: str) -> None:
    """Write the key in a folder and a file (0600) its owner alone can read, whole or not
    at all: two flows making it at once, or one killed mid-write, leave no partial key."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    write_atomic(Path(path), pem)


def _new_key_pem() -> str:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 (only to make)
    from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415

    key = rsa.generate_private_key(public_exponent=65537, key_size=_KEY_BITS)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def placeholder_service_account() -> dict[str, str]:
    """The service-account JSON google-auth loads (every field it requires)."""
    return {
        "type": "service_account",
        "private_key_id": "flowproof-placeholder",
        "private_key": _private_key_pem(),
        "client_email": PLACEHOLDER_ACCOUNT,
        "client_id": "0",
        # Never called: the universe below makes google-auth sign its own token.
        "token_uri": "https://oauth2.flowproof.invalid/token",
        "universe_domain": PLACEHOLDER_UNIVERSE,
    }


def credentials_path(folder: str) -> str:
    return os.path.join(folder, CREDENTIALS_FILE)


def placeholder_service_account_json() -> str:
    """The file's content (one key per user: every flow's file is the same)."""
    return json.dumps(placeholder_service_account(), indent=2)
