"""How receivers reach their services over the network layer (`trunkwatch.net`), and what
its answers and failures mean to the notifier.

A receiver's client never follows a redirect (a webhook URL or API that moves is a
configuration error) and reads at most MAX_ANSWER_BYTES. Every failure is a ChannelError,
which makes the notifier retry at the next tick, or a ChannelRejected when the receiver
refused the message itself (`refusal`), which the notifier records instead of retrying.
Messages name the receiver (`what`), never a URL's query, a header, or a Slack webhook's
secret path; GitHub's API paths are named.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from trunkwatch.channels.base import ChannelError, ChannelRejected
from trunkwatch.net.github import GitHubError
from trunkwatch.net.http import HttpClient, HttpError, Response

MAX_ANSWER_BYTES = 8 * 1024 * 1024  # a page of 100 issues with long bodies stays well under
# 4xx answers that say nothing against the message: a timeout and a rate limit (GitHub's
# secondary one is a 403), and a credential or address that is wrong, which once fixed must
# deliver what waited rather than find it all marked failed.
RETRIED_4XX = frozenset({401, 403, 404, 408, 429})


def client(timeout_s: float, deadline: float) -> HttpClient:
    """A delivery's client: each request within `timeout_s`, all of them before `deadline`
    (time.monotonic(): the notifier tick's budget)."""
    return HttpClient(timeout_s, deadline=deadline, max_body_bytes=MAX_ANSWER_BYTES, max_redirects=0)


def refusal(status: int, message: str) -> ChannelError:
    """A ChannelRejected for a 4xx that refuses the message itself (400, 413, 422, ...),
    else a ChannelError."""
    if 400 <= status < 500 and status not in RETRIED_4XX:
        return ChannelRejected(message)
    return ChannelError(message)


def failure(response: Response, what: str) -> ChannelError:
    """The error for a non-2xx answer, with what the receiver said."""
    said = response.said()
    return refusal(response.status, f"{what} answered {response.status}" + (f": {said}" if said else ""))


@contextmanager
def delivering(what: str) -> Iterator[None]:
    """The network layer's errors as the notifier's: a refusing GitHub answer by its status,
    anything else (no answer in time, a broken or oversized one, a rate limit) a ChannelError."""
    try:
        yield
    except GitHubError as err:
        raise refusal(err.response.status, f"{what}: {err.answered()}") from None
    except HttpError as err:
        if err.allowed_s is not None:
            raise ChannelError(f"{what}: no answer within {err.allowed_s:g}s") from None
        raise ChannelError(f"{what}: {err.reason}") from None


def post_json(url: str, payload: Any, *, what: str, timeout_s: float, deadline: float) -> None:
    """POST `payload` as JSON to `url` once; any answer but a 2xx raises (see `failure`)."""
    with delivering(what), client(timeout_s, deadline) as http:
        response = http.send("POST", url, payload=payload)
    if not 200 <= response.status < 300:
        raise failure(response, what)
