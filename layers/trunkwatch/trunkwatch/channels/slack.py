"""A Slack incoming webhook: the email's content as Block Kit, in an attachment coloured by
status and priority; a culprit's author mentioned (`<@U...>`) where the receiver's
`slack_users` maps its GitHub login to a Slack user id, named by the login otherwise.

Slack rejects a message whose section text passes 3000 characters or that has more than 50
blocks, so long parts are cut with a note saying so rather than the post failing. The
webhook URL is a credential: it is resolved when sending and never appears in an error.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trunkwatch.channels import digest
from trunkwatch.channels.base import ChannelError, DigestNotification, Notification, Resolve, Route
from trunkwatch.channels.content import Content, content
from trunkwatch.channels.transport import post_json
from trunkwatch.domain.config import (
    Check,
    ConfigError,
    ReceiverConfig,
    TokenRef,
    _boolean,
    _mapping,
    _secret_or_string,
)
from trunkwatch.net.http import DEFAULT_TIMEOUT_S

MAX_SECTION_CHARS = 3000
MAX_HEADER_CHARS = 150
MAX_BLOCKS = 50
MAX_TEXT_CHARS = 3000  # the notification fallback text
CUT_NOTE = "\n_(cut to fit Slack's limits; the full list is in the email and the webhook JSON)_"

RESOLVED_COLOUR = "#2eb886"
ACKNOWLEDGED_COLOUR = "#439fe0"
FIRING_COLOURS = {"P1": "#d40e0d", "P2": "#e8912d", "P3": "#daa038"}
OTHER_FIRING_COLOUR = "#e8912d"
DIGEST_COLOUR = "#439fe0"  # a report, not an alert
# Slack's user ids: U (or W, on Enterprise Grid), then capitals and digits.
_SLACK_USER = re.compile(r"^[UW][A-Z0-9]{2,}$")
_GITHUB_LOGIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*(\[bot\])?$")

# GitHub login -> Slack user id (a receiver's `slack_users`).
SlackUsers = Mapping[str, str]


def escape(text: str) -> str:
    """The three characters Slack's mrkdwn requires escaped: `&`, `<` and `>` (its control
    characters, which start links and mentions such as `<!channel>`), as `&amp;`, `&lt;`
    and `&gt;`, and nothing else. Every text field but a plain_text one is read this way,
    the message's own `text` and the attachment's `fallback` included. (`*`, `_` and `~`
    cannot be escaped: text from alerts that must show as written goes in code spans.)"""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escaped_within(text: str, limit: int) -> str:
    """`text` escaped, cut to `limit` characters without leaving half an entity."""
    escaped = escape(text)
    if len(escaped) <= limit:
        return escaped
    cut = escaped[:limit]
    entity = cut.rfind("&")
    return cut[:entity] if entity >= 0 and ";" not in cut[entity:] else cut


def _link(url: str, title: str) -> str:
    return f"<{escape(url)}|{escape(title)}>"


def _code(text: str) -> str:
    """Text for inside a code span or block: escaped, and no backtick to end it early."""
    return escape(text.replace("`", "'"))


def _section(text: str) -> dict[str, Any]:
    if len(text) > MAX_SECTION_CHARS:
        text = text[: MAX_SECTION_CHARS - len(CUT_NOTE)] + CUT_NOTE
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def colour(notification: Notification) -> str:
    if not content(notification).firing:
        return RESOLVED_COLOUR
    return FIRING_COLOURS.get(notification.alert.labels.get("priority", ""), OTHER_FIRING_COLOUR)


def mention(login: str, users: SlackUsers) -> str:
    """A GitHub login as Slack shows it: the mention of its mapped user, else the login."""
    user = users.get(login) if login else None
    return f"<@{user}>" if user else escape(login or "unknown")


def slack_message(notification: Notification, users: SlackUsers | None = None) -> dict[str, Any]:
    """The webhook payload: `text` for notifications and old clients, the blocks in one
    attachment so the message carries a colour bar. `users` maps GitHub logins to the Slack
    users to mention as the culprits' authors."""
    told = content(notification)
    status = "FIRING" if told.firing else "RESOLVED"
    headline = f"{status}: {told.summary}"
    blocks = _blocks(told, headline, users or {})
    if len(blocks) > MAX_BLOCKS:
        blocks = [*blocks[: MAX_BLOCKS - 1], _section(CUT_NOTE.strip())]
    text = _escaped_within(headline, MAX_TEXT_CHARS)
    attachment = {"color": colour(notification), "fallback": text, "blocks": blocks}
    return {"text": text, "attachments": [attachment]}


def digest_message(notification: DigestNotification) -> dict[str, Any]:
    """The daily digest as a short report: a header, one section per part, its links. It
    mentions no one (a report pages nobody); authors are named by their login."""
    told = digest.report(notification)
    blocks: list[dict[str, Any]] = [_header(told.headline)]
    for heading, lines in told.sections:
        blocks.append(_section("\n".join([f"*{escape(heading)}*", *(escape(line) for line in lines)])))
    if told.links:
        blocks.append(_section("  |  ".join(_link(url, title) for title, url in told.links)))
    blocks.append(
        {"type": "context", "elements": [{"type": "mrkdwn", "text": f"Source: {escape(told.source)}"}]}
    )
    text = _escaped_within(told.headline, MAX_TEXT_CHARS)
    return {"text": text, "attachments": [{"color": DIGEST_COLOUR, "fallback": text, "blocks": blocks}]}


def acknowledgement_message(notification: Notification) -> dict[str, Any]:
    """The alert's acknowledgement, said once: who, when, the note, and which alert."""
    told = content(notification)
    headline = f"ACKNOWLEDGED: {told.summary}"
    blocks = [_header(headline), _section(escape(told.acknowledged or "Acknowledged")), _context(told)]
    text = _escaped_within(headline, MAX_TEXT_CHARS)
    return {"text": text, "attachments": [{"color": ACKNOWLEDGED_COLOUR, "fallback": text, "blocks": blocks}]}


def _header(headline: str) -> dict[str, Any]:
    # plain_text: shown as written, no control characters to escape.
    header = headline if len(headline) <= MAX_HEADER_CHARS else headline[: MAX_HEADER_CHARS - 3] + "..."
    return {"type": "header", "text": {"type": "plain_text", "text": header}}


def _context(told: Content) -> dict[str, Any]:
    return {
        "type": "context",
        "elements": [
            {"type": "mrkdwn", "text": f"Source: {escape(told.source)}"},
            {"type": "mrkdwn", "text": f"Fingerprint: `{_code(told.fingerprint)}`"},
        ],
    }


def _blocks(told: Content, headline: str, users: SlackUsers) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [
        _header(headline),
        _section("\n".join(escape(line) for line in told.when)),
    ]
    if told.acknowledged:
        blocks.append(_section(escape(told.acknowledged)))
    if told.culprit:
        c = told.culprit
        text = f"*{escape(c.heading)}:* `{_code(c.sha)}`"
        if c.pr:
            text += f" {_link(c.pr_url, '#' + c.pr) if c.pr_url else escape('#' + c.pr)}"
        if c.title:
            text += f' "{escape(c.title)}"'
        if c.author:
            text += f" by {mention(c.author, users)}"
        if c.commit_url:
            text += f"\n{_link(c.commit_url, 'commit ' + c.sha)}"
        if told.verdict:
            text += f"\n{escape(told.verdict)}"
        blocks.append(_section(text))
    if told.jobs:
        lines = [f"*{escape(told.jobs_heading)}*"]
        for job in told.jobs:
            before, author, after = told.job_culprit_parts(job)
            culprit = f"{escape(before)}{mention(author, users)}{escape(after)}"
            lines.append(f"• `{_code(job)}`\n    {culprit}")
        if told.more_jobs:
            lines.append(f"• {escape(told.more_jobs)}")
        blocks.append(_section("\n".join(lines)))
    if told.failure_lines:
        code = "\n".join(_code(line) for line in told.failure_lines)
        blocks.append(_section(f"*First failure lines:*\n```{code}```"))
    if told.links:
        blocks.append(_section("  |  ".join(_link(url, title) for title, url in told.links)))
    blocks.append(_context(told))
    return blocks


@dataclass
class SlackChannel:
    """`webhook_url` resolves the URL when a message is due (a secret is read only then);
    `route` is the receiver's matchers."""

    name: str
    webhook_url: Callable[[], str | None] = field(repr=False)
    route: Callable[[dict[str, str]], bool]
    timeout_s: float = DEFAULT_TIMEOUT_S
    users: SlackUsers = field(default_factory=dict)  # GitHub login -> Slack user id

    def accepts(self, labels: dict[str, str]) -> bool:
        return self.route(labels)

    def send(self, notification: Notification) -> None:
        self._post(slack_message(notification, self.users), notification.deadline)

    def send_digest(self, notification: DigestNotification) -> None:
        self._post(digest_message(notification), notification.deadline)

    def acknowledge(self, notification: Notification) -> None:
        self._post(acknowledgement_message(notification), notification.deadline)

    def _post(self, message: dict[str, Any], deadline: float) -> None:
        what = f"Slack receiver {self.name}"
        try:
            url = self.webhook_url()
        except ConfigError as err:
            raise ChannelError(f"{what}: {err}") from None
        if not url:
            raise ChannelError(f"{what}: no webhook URL")
        # A 400 invalid_blocks, say, is rejected for good.
        post_json(url, message, what=what, timeout_s=self.timeout_s, deadline=deadline)


def _slack_users(value: Any) -> dict[str, str]:
    """`{<GitHub login>: <Slack user id>}`."""
    users = _mapping(value)
    for login, user in users.items():
        if not isinstance(login, str) or not _GITHUB_LOGIN.match(login):
            raise ValueError(f"{login!r} is not a GitHub login (letters, digits and hyphens)")
        if not isinstance(user, str) or not _SLACK_USER.match(user):
            raise ValueError(
                f"{login}: {user!r} is not a Slack user id (U or W, then capitals and digits: "
                "the member ID of the user's Slack profile, e.g. U024BE7LH)"
            )
    return users


@dataclass(frozen=True, kw_only=True)
class SlackReceiver(ReceiverConfig):
    """`type: slack`: `url` is the incoming webhook's URL itself or a reference to where it
    is kept (`{secret: name}`; `env` and `ssm` work too, as for tokens). `slack_users` maps
    GitHub logins to Slack user ids: a culprit's author is mentioned, not just named. With
    `digest`, the daily digest too."""

    url: str | TokenRef
    slack_users: dict[str, str] = field(default_factory=dict)
    digest: bool = False

    CHECKS: ClassVar[dict[str, Check]] = {
        **ReceiverConfig.CHECKS,
        "url": _secret_or_string,
        "slack_users": _slack_users,
        "digest": _boolean,
    }

    def takes_digest(self) -> bool:
        return self.digest

    def log_name(self) -> str:
        """`slack:<where the secret is>`, or a digest of a literal URL (itself the credential)."""
        url = self.url
        if isinstance(url, TokenRef):
            return f"slack:{url.place}"
        return f"slack:{hashlib.sha256(url.encode()).hexdigest()[:12]}"

    def channel(self, name: str, route: Route, resolve: Resolve) -> SlackChannel:
        url = self.url
        webhook_url = (lambda: resolve(url)) if isinstance(url, TokenRef) else (lambda: url)
        return SlackChannel(name=name, webhook_url=webhook_url, route=route, users=self.slack_users)
