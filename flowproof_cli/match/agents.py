"""Which agent sent a request, by the product and version its User-Agent names, and whether
the presets in force were tested with that version.

The coding CLIs change their requests from release to release, and users run many releases
at once. A trace therefore keeps, per turn, the `product/version` of the agent that sent it
(`claude-cli/2.1.332`): a replay whose agent changed version can say so before the field it
diverged on, and a preset whose rules all went unused can say which version it may not know.

The agent is read from the `User-Agent` header only (every coding CLI puts its own version
there; a version field of a body is product-specific and would need a reader per product).
A User-Agent is a list of `product/version` tokens and `(comments)`; the agent is the token
of the agent a preset in force names (`agent:` of the preset), else the first token whose
version starts with a digit. An agent built on an SDK is then named by the SDK's or the HTTP
library's token (`python-httpx/0.28.1`), which still tells an upgrade of it apart; a token
such as `OpenAI/Python 1.52.0`, whose "version" is no number, names nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from flowproof_cli.match.presets import Preset
from flowproof_cli.match.rules import MatchRules

#: How much of a User-Agent is read: an agent's own header, bounded like any outside text.
_READ = 512
_COMMENT = re.compile(r"\([^()]*\)")
#: `product/version` (RFC 9110 tokens); the version stops at a further `/`, so Gemini CLI's
#: `GeminiCLI-tui/0.61.0/gemini-2.5-flash` is `GeminiCLI-tui/0.61.0`.
_PRODUCT = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]{1,64})/([0-9][0-9A-Za-z.+_-]{0,63})")


def _products(user_agent: str) -> list[tuple[str, str]]:
    text = user_agent[:_READ]
    while (stripped := _COMMENT.sub(" ", text)) != text:  # nested comments, inside out
        text = stripped
    found = (_PRODUCT.match(word) for word in text.split())
    return [(match.group(1), match.group(2)) for match in found if match is not None]


def is_agent(product: str, token: str) -> bool:
    """Whether a User-Agent's product is the agent a preset's `agent:` token names: the token
    itself, or a longer one that continues it after `-` or `_` (Gemini CLI 0.61 sends
    `GeminiCLI-tui`, 0.41 `GeminiCLI`)."""
    return product == token or (
        product.startswith(token) and product[len(token) : len(token) + 1] in ("-", "_")
    )


def agent_of(user_agent: str | None, tokens: Sequence[str] = ()) -> str | None:
    """`product/version` of the agent that sent a request, or None when its User-Agent names
    no versioned product. `tokens`: the agents the presets in force name, preferred."""
    if not user_agent:
        return None
    products = _products(user_agent)
    for token in tokens:
        for product, version in products:
            if is_agent(product, token):
                return f"{product}/{version}"
    return f"{products[0][0]}/{products[0][1]}" if products else None


@dataclass
class RunAgents:
    """The agents one run's requests came from, each once, in the order they first showed."""

    seen: list[str] = field(default_factory=list)
    #: What each User-Agent read as, by (header, tokens): an agent sends the same header on
    #: every request, so it is parsed once a run, not on every proxied request.
    _read: dict[tuple[str | None, tuple[str, ...]], str | None] = field(
        default_factory=dict, repr=False
    )

    def read(self, user_agent: str | None, tokens: Sequence[str] = ()) -> str | None:
        """The agent of one request (`tokens`: the agents the presets in force name, as
        `agent_of` takes them), kept among the run's."""
        key = (user_agent, tuple(tokens))
        if key in self._read:
            agent = self._read[key]
        else:
            agent = self._read[key] = agent_of(user_agent, tokens)
        if agent is not None and agent not in self.seen:
            self.seen.append(agent)
        return agent


def split_agent(agent: str) -> tuple[str, str]:
    """`claude-cli/2.1.332` -> (`claude-cli`, `2.1.332`)."""
    product, _, version = agent.partition("/")
    return product, version


def preset_version_notes(rules: MatchRules, agents: Iterable[str]) -> list[str]:
    """A note per agent preset in force whose rules all went unused while this run's
    requests came from its agent at a version it was not tested with: its rules may no
    longer know where that version puts what they relax. Relocation is not counted (it is
    not tied to a layout); a preset tested with that version, or whose agent sent nothing
    here, is left alone."""
    seen = list(dict.fromkeys(agents))
    return [
        note for preset in rules.presets if (note := _untested(preset, rules, seen)) is not None
    ]


def _untested(preset: Preset, rules: MatchRules, agents: list[str]) -> str | None:
    if preset.agent is None:
        return None
    own = [usage for usage in rules.usage if usage.origin == f"preset {preset.name}"]
    if not own or not all(usage.unused for usage in own):
        return None
    untested = [
        agent
        for agent, (product, version) in ((agent, split_agent(agent)) for agent in agents)
        if is_agent(product, preset.agent) and version not in preset.versions_tested
    ]
    if not untested:
        return None
    tested = ", ".join(preset.versions_tested) or "none named"
    return (
        f"preset `{preset.name}` matched nothing in this run's requests: it may not know "
        f"{', '.join(untested)} (tested: {tested}). Fix: compare this request with the "
        f"preset's rules (`flowproof match show {preset.name}`) and declare what this version "
        "moved under the flow's own `match:` (docs/matching.md)"
    )
