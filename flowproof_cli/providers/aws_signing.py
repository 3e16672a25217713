"""Signing what record forwards to Amazon Bedrock (AWS SigV4), with flowproof's own
credentials.

Bedrock requests are signed over the host, the path, the time and the body, so the agent's
own signature (made with the placeholder credentials flowproof hands it, for the proxy's
host) is worthless upstream: record drops it and signs the forwarded request again with
botocore's signer. The credentials are the standard variables of flowproof's own
environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; the region from
AWS_REGION / AWS_DEFAULT_REGION, else the upstream's host). They are read once when record
starts, used only to sign, never handed to the agent (it gets placeholders), never stored,
never shown (`repr` leaves them out).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from flowproof_cli.errors import ConfigError

ACCESS_KEY_VARIABLE = "AWS_ACCESS_KEY_ID"
SECRET_KEY_VARIABLE = "AWS_SECRET_ACCESS_KEY"  # noqa: S105 (a name)
TOKEN_VARIABLE = "AWS_SESSION_TOKEN"  # noqa: S105 (a name)
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
#: Where record forwards Bedrock calls (B's per-provider upstream variable).
BEDROCK_UPSTREAM_VARIABLE = "FLOWPROOF_UPSTREAM_BEDROCK"
#: A Bedrock API key (sent as a bearer token), used only when no AWS credentials are set.
BEDROCK_KEY_VARIABLE = "FLOWPROOF_KEY_BEDROCK"
#: Variables whose values are secrets of flowproof's own: the agent gets placeholders in
#: their place, and a run that leaks one fails (with the record keys). AWS_BEARER_TOKEN_BEDROCK
#: is a Bedrock API key: a client that sees it would send it to the proxy.
SECRET_VARIABLES = (
    SECRET_KEY_VARIABLE,
    TOKEN_VARIABLE,
    "AWS_SECURITY_TOKEN",  # the older name of the session token, still read
    "AWS_BEARER_TOKEN_BEDROCK",
)
#: The service name Bedrock runtime requests are signed for.
SERVICE = "bedrock"
#: `bedrock-runtime.<region>.amazonaws.com` (and `bedrock-runtime-fips.`): the region.
_HOST_REGION = re.compile(r"^bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com")
#: Headers of the agent's own that never travel upstream beside flowproof's signature: the
#: agent's signature parts, made with its placeholder credentials.
DROPPED_PREFIX = "x-amz-"


def missing_credentials_message(why: str) -> str:
    return (
        f"{why}: record signs each Bedrock request (AWS SigV4) with flowproof's own AWS "
        f"credentials and none are set. Fix: export {ACCESS_KEY_VARIABLE} and "
        f"{SECRET_KEY_VARIABLE} (and {TOKEN_VARIABLE} for temporary credentials), and the "
        f"region in {REGION_VARIABLES[0]} or {REGION_VARIABLES[1]}, where flowproof runs (or "
        f"a Bedrock API key in {BEDROCK_KEY_VARIABLE}); the agent never sees them"
    )


@dataclass(frozen=True)
class AwsSigner:
    """Signs one forwarded request at a time; holds the credentials, never shows them."""

    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    token: str | None = field(default=None, repr=False)
    region: str | None = None

    def region_for(self, url: str) -> str:
        """The region to sign for: the environment's, else the one in the upstream host."""
        if self.region:
            return self.region
        found = _HOST_REGION.match(urlsplit(url).hostname or "")
        if found is None:
            raise ConfigError(
                f"no AWS region to sign Bedrock requests for. Fix: export "
                f"{REGION_VARIABLES[0]} (e.g. us-east-1) where flowproof runs"
            )
        return found.group(1)

    def signed_headers(self, url: str, body: bytes, headers: Mapping[str, str]) -> dict[str, str]:
        """`headers` plus the signature (`authorization`, `x-amz-date`, the session token)
        for a POST of `body` to `url`. Every header given is signed, so each must travel
        exactly as given."""
        # botocore is loaded only by a record that reaches Bedrock.
        from botocore.auth import SigV4Auth  # noqa: PLC0415
        from botocore.awsrequest import AWSRequest  # noqa: PLC0415
        from botocore.credentials import Credentials  # noqa: PLC0415

        request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
        credentials = Credentials(self.access_key, self.secret_key, self.token)
        SigV4Auth(credentials, SERVICE, self.region_for(url)).add_auth(request)
        return {name.lower(): str(value) for name, value in request.headers.items()}


def signer_from_environment(environ: Mapping[str, str]) -> AwsSigner | None:
    """The signer for flowproof's own AWS credentials, or None when none are set.

    Raises ConfigError (exit 2) when FLOWPROOF_UPSTREAM_BEDROCK says Bedrock is recorded
    but the credentials are missing or half set, or when botocore is not installed.
    """
    access = environ.get(ACCESS_KEY_VARIABLE) or ""
    secret = environ.get(SECRET_KEY_VARIABLE) or ""
    wanted = bool(environ.get(BEDROCK_UPSTREAM_VARIABLE))
    if bool(access) != bool(secret):
        have, lack = (
            (ACCESS_KEY_VARIABLE, SECRET_KEY_VARIABLE)
            if access
            else (SECRET_KEY_VARIABLE, ACCESS_KEY_VARIABLE)
        )
        raise ConfigError(
            f"{have} is set but {lack} is not: record signs Bedrock requests with both. "
            f"Fix: export {lack} too, or unset {have}"
        )
    if not access:
        if wanted and not environ.get(BEDROCK_KEY_VARIABLE):
            raise ConfigError(missing_credentials_message(f"{BEDROCK_UPSTREAM_VARIABLE} is set"))
        return None
    try:
        import botocore.auth  # noqa: F401, PLC0415
    except ImportError:
        raise ConfigError(
            "recording Bedrock needs botocore to sign its requests. Fix: "
            "pip install 'flowproof[bedrock]' (or botocore) where flowproof runs"
        ) from None
    region = next((environ[name] for name in REGION_VARIABLES if environ.get(name)), None)
    token = environ.get(TOKEN_VARIABLE) or environ.get("AWS_SECURITY_TOKEN") or None
    return AwsSigner(access, secret, token, region)


@dataclass(frozen=True)
class BedrockSigning:
    """Record's `UpstreamSigner` for Bedrock: flowproof's AWS credentials when set, else
    the record key as a Bedrock API key, else the reason it has neither."""

    signer: AwsSigner | None = None

    def headers_for(
        self, url: str, body: bytes, key_headers: Mapping[str, str], what: str
    ) -> dict[str, str] | str:
        """The forward's content type and accept, signed (every header given is signed, so
        each travels exactly as given); or with the key; or why the record fails."""
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self.signer is None and key_headers:
            return {**headers, **key_headers}
        if self.signer is None:
            return "flowproof: " + missing_credentials_message(f"the agent called Bedrock ({what})")
        try:
            return self.signer.signed_headers(url, body, headers)
        except ConfigError as exc:
            return f"flowproof: {exc}"
