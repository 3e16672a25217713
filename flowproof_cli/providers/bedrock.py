"""Amazon Bedrock: what its clients in the agent need to reach flowproof, what they must
never get, and how record signs what it forwards.

boto3 and the AWS SDK for JavaScript read AWS_ENDPOINT_URL_BEDROCK_RUNTIME for the
`bedrock-runtime` service alone (no other AWS service is redirected), sign every request
with the credentials of their environment, and refuse to start without a region. The agent
gets placeholder credentials (record signs again with flowproof's own, `aws_signing.py`),
a region when it inherits none, and none of flowproof's AWS secrets or profiles: a profile
would win over the placeholders, a session token or Bedrock API key would travel to the
proxy. Its signature parts (`x-amz-*`, made for the proxy's host) never travel upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from flowproof_cli.providers.aws_signing import (
    DROPPED_PREFIX,
    REGION_VARIABLES,
    SECRET_VARIABLES,
    BedrockSigning,
    signer_from_environment,
)
from flowproof_cli.providers.base import Provider, ProxyAddress, UpstreamSigner

PLACEHOLDER_ACCESS_KEY = "FLOWPROOFPLACEHOLDER"
PLACEHOLDER_SECRET = "flowproof-placeholder-key"  # noqa: S105 (the placeholder key)
#: The region a client gets when the agent inherits none (boto3 reads AWS_DEFAULT_REGION,
#: the JavaScript SDK AWS_REGION: one inherited is copied to the other); it only names the
#: signing scope of the placeholder signature.
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class BedrockProvider(Provider):
    def agent_variables(self, inherited: Mapping[str, str], proxy: ProxyAddress) -> dict[str, str]:
        """The endpoint and placeholder credentials, and a region under both names when
        the agent lacks one: copied from the other name, never from flowproof's own."""
        variables = super().agent_variables(inherited, proxy)
        region = next((inherited[name] for name in REGION_VARIABLES if inherited.get(name)), None)
        for name in REGION_VARIABLES:
            if not inherited.get(name):
                variables[name] = region or DEFAULT_REGION
        return variables

    def upstream_signer(self, environ: Mapping[str, str]) -> UpstreamSigner:
        return BedrockSigning(signer_from_environment(environ))


BEDROCK = BedrockProvider(
    "bedrock",
    root_url_variables=("AWS_ENDPOINT_URL_BEDROCK_RUNTIME",),
    placeholders={
        "AWS_ACCESS_KEY_ID": PLACEHOLDER_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": PLACEHOLDER_SECRET,
    },
    withheld_variables=(*SECRET_VARIABLES, "AWS_PROFILE", "AWS_DEFAULT_PROFILE"),
    secret_variables=SECRET_VARIABLES,
    keyless=True,
    dropped_header_prefixes=(DROPPED_PREFIX,),
)
