"""Placeholder Google Cloud credentials, so a Vertex AI client starts with no real ones.

`google-genai` (`vertexai=True`) and `anthropic`'s `AnthropicVertex` authenticate with
Application Default Credentials: `google.auth.default()` reads the file that
GOOGLE_APPLICATION_CREDENTIALS names, ahead of any other source, and the clients send its
access token as `Authorization: Bearer`. The agent must hold no real credential, and must
start offline (in the loopback-only namespace too), so flowproof points that variable at a
file of its own: a service account whose key was made for this run and that belongs to no
project.

Why it needs no network: AnthropicVertex refreshes the credentials as it loads them, and a
refresh normally posts to Google's token endpoint. A service account outside Google's
default universe (`universe_domain` below) instead signs its own token (a self-signed JWT,
google-auth >= 2.23): the refresh is local. The proxy drops that token with every other
client credential; at record it sends FLOWPROOF_KEY_VERTEX instead.

The file names no project: the agent names its own (`project=`/`location=`, or
ANTHROPIC_VERTEX_PROJECT_ID / CLOUD_ML_REGION), as the request path carries them.
"""

from __future__ import annotations

import functools
import json
import os

#: The variable google-auth reads first.
CREDENTIALS_VARIABLE = "GOOGLE_APPLICATION_CREDENTIALS"
#: The file's name in the flow's private folder (beside the task file).
CREDENTIALS_FILE = "google-placeholder-credentials.json"
#: A universe no Google service lives in: credentials there sign their own tokens.
PLACEHOLDER_UNIVERSE = "flowproof.invalid"
PLACEHOLDER_ACCOUNT = "flowproof-placeholder@flowproof.invalid"
#: Bits of the run's placeholder key: google-auth signs with RSA only. The key guards
#: nothing, so the smallest size OpenSSL still signs with: 2048 bits took 0.09 s to make on
#: this project's machine, 1024 bits 0.02 s, paid once by every flowproof process that
#: starts an agent.
_KEY_BITS = 1024


@functools.cache
def _private_key_pem() -> str:
    """An RSA key made once per flowproof process, never stored beyond the flow's private
    folder: it signs nothing anyone checks."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 (only agents)
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
    """The file's content (the key is made once per process: every flow's file is the same)."""
    return json.dumps(placeholder_service_account(), indent=2)
