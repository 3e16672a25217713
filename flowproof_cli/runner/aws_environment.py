"""What a Bedrock client in the agent needs to reach flowproof, and what it must never get.

boto3 and the AWS SDK for JavaScript read AWS_ENDPOINT_URL_BEDROCK_RUNTIME for the
`bedrock-runtime` service alone (no other AWS service is redirected), sign every request
with the credentials of their environment, and refuse to start without a region. The agent
gets placeholder credentials (record signs again with flowproof's own,
cassette/aws_signing.py), a region when it inherits none, and none of flowproof's AWS
secrets or profiles: a profile would win over the placeholders, a session token or Bedrock
API key would travel to the proxy.
"""

from __future__ import annotations

from collections.abc import Mapping

from flowproof_cli.cassette.aws_signing import REGION_VARIABLES, SECRET_VARIABLES

BEDROCK_URL_VARIABLES = ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME",)
PLACEHOLDER_ACCESS_KEY = "FLOWPROOFPLACEHOLDER"
PLACEHOLDER_SECRET = "flowproof-placeholder-key"  # noqa: S105 (the placeholder key)
#: Never inherited by the agent.
REMOVED_AWS_VARIABLES = (*SECRET_VARIABLES, "AWS_PROFILE", "AWS_DEFAULT_PROFILE")
#: The region a client gets when the agent inherits none (boto3 reads AWS_DEFAULT_REGION,
#: the JavaScript SDK AWS_REGION: one inherited is copied to the other); it only names the
#: signing scope of the placeholder signature.
DEFAULT_REGION = "us-east-1"


def aws_agent_variables(inherited: Mapping[str, str], proxy_no_v1: str) -> dict[str, str]:
    """The variables set for the agent (the endpoint, placeholder credentials, a region).
    `inherited` is the agent's environment as it stands, record keys already replaced: a
    region is copied from there, never from flowproof's own."""
    variables = dict.fromkeys(BEDROCK_URL_VARIABLES, proxy_no_v1)
    variables["AWS_ACCESS_KEY_ID"] = PLACEHOLDER_ACCESS_KEY
    variables["AWS_SECRET_ACCESS_KEY"] = PLACEHOLDER_SECRET
    region = next((inherited[name] for name in REGION_VARIABLES if inherited.get(name)), None)
    for name in REGION_VARIABLES:  # both names: each SDK reads one of them
        if not inherited.get(name):
            variables[name] = region or DEFAULT_REGION
    return variables
