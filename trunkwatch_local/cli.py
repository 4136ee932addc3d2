"""The `trunkwatch` command: demo, replay, serve and poll on the local runtime, and
check-config."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from trunkwatch.domain.config import BUILDKITE_SOURCE, ConfigError, DocumentError

if TYPE_CHECKING:
    from trunkwatch.domain.config import Deployment

STORES = ("memory", "dynamodb")  # trunkwatch_local.stack.STORES (not imported: --help stays fast)
WEBHOOK_SECRET_VARIABLE = "TRUNKWATCH_WEBHOOK_SECRET"  # noqa: S105 - the variable's name
BUILDKITE_TOKEN_VARIABLE = "TRUNKWATCH_BUILDKITE_WEBHOOK_TOKEN"  # noqa: S105 - the variable's name


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line naming the problem (argparse's default also prints the usage)."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog.split()[0]} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="trunkwatch", description="Trunk-health alerting for CI, run locally on an AWS emulation."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--template", type=Path, help="template.yaml to wire from (default: the project's)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    demo = sub.add_parser("demo", help="run the pipeline on a bundled PyTorch-style scenario")
    demo.add_argument("--json", action="store_true", help="print SNS messages as JSON lines")
    _store_option(demo)
    replay = sub.add_parser("replay", help="replay a JSON Lines scenario file")
    replay.add_argument("file", type=Path)
    replay.add_argument("--json", action="store_true", help="print SNS messages as JSON lines")
    _store_option(replay)
    replay.add_argument(
        "--chaos", type=int, metavar="SEED", help="kill invocations at random calls (seeded draws)"
    )
    replay.add_argument(
        "--crash-rate",
        type=float,
        default=0.03,
        metavar="P",
        help="with --chaos: the share of calls (AWS and storage) that kill their invocation (default 0.03)",
    )
    serve = sub.add_parser("serve", help="local pipeline plus the Alertmanager-compatible API")
    serve.add_argument(
        "--config", type=Path, help="configuration file (YAML/JSON); polls its sources on its schedule"
    )
    serve.add_argument(
        "--port", type=_port, default=9093, help="API port on 127.0.0.1 (default 9093; 0: any free port)"
    )
    serve.add_argument("--scenario", type=Path, help="replay this file first, then keep serving")
    serve.add_argument(
        "--tokens", type=Path, help="API tokens document; without it the local API needs no token"
    )
    _store_option(serve)
    poll = sub.add_parser("poll", help="one tick against the configured sources")
    poll.add_argument("--config", type=Path, required=True)
    poll.add_argument("--json", action="store_true")
    poll.add_argument(
        "--state",
        type=Path,
        help="where the pipeline's state is kept between runs (default: one file per configuration "
        "under $XDG_STATE_HOME/trunkwatch, ~/.local/state/trunkwatch without it)",
    )
    check = sub.add_parser(
        "check-config", help="check a configuration file as the deployed functions will read it"
    )
    check.add_argument("file", type=Path)
    return parser


def _store_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--store",
        choices=STORES,
        default=STORES[0],
        help="where the functions' items live: the in-memory store with its stream records "
        "(default), or moto's DynamoDB table and its stream",
    )


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to 65535; 0: any free port)")
    return port


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trunkwatch")
    except PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "check-config":
            return _check_config(args.file)
        if args.command == "demo":
            from trunkwatch_local.scenario import demo_replay
            from trunkwatch_local.session import run_replay

            return _print(run_replay(demo_replay(), args.template, store=args.store), args.json)
        if args.command == "replay":
            return _replay(args)
        if args.command == "poll":
            return _poll(args)
        return _serve(args)
    except DocumentError as err:
        # A file's problems, one a line, each naming the file, line and key path.
        lines = err.lines() if err.name else [f"trunkwatch: error: {err}"]
        print("\n".join(lines), file=sys.stderr)
        return 2
    except ConfigError as err:
        print(f"trunkwatch: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly. Point stdout at /dev/null so the
        # interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _say(text: str) -> None:
    """A line for the person running the command (stdout carries the notifications)."""
    print(f"trunkwatch: {text}", file=sys.stderr, flush=True)


def _replay(args: argparse.Namespace) -> int:
    from trunkwatch_local.chaos import Chaos
    from trunkwatch_local.replay import read_replay
    from trunkwatch_local.session import run_replay

    try:
        chaos = None if args.chaos is None else Chaos(args.chaos, args.crash_rate)
    except ValueError as err:
        raise ConfigError(f"--crash-rate: {err}") from None
    status = _print(run_replay(read_replay(args.file), args.template, chaos, args.store), args.json)
    if chaos is not None:
        _say(f"chaos seed {args.chaos}: {chaos.stats.line()}")
    return status


def _print(messages: Iterable[Any], as_json: bool) -> int:
    count = 0
    try:
        for published in messages:
            count += 1
            if as_json:
                print(json.dumps(published.as_json()), flush=True)
            else:
                print(timeline_line(published), flush=True)
    finally:
        close = getattr(messages, "close", None)
        if close is not None:
            close()  # a replay generator stops its local runtime now, not at garbage collection
    if not as_json:
        print(f"-- {count} notification{'s' if count != 1 else ''} sent", flush=True)
    return 0


def timeline_line(published: Any) -> str:
    """One notification, for a person: when, what, and the culprit."""
    if published.is_digest:
        return _digest_line(published)
    message = published.message
    alert = message["alerts"][0]
    labels, annotations = alert["labels"], alert["annotations"]
    when = published.at.strftime("%Y-%m-%d %H:%M")
    status, name, summary = message["status"].upper(), labels["alertname"], annotations.get("summary", "")
    line = f"{when}  {status:8} {labels['priority']} {name:16} {summary}"
    details = []
    if message.get("notification_reason") not in (None, "firing", "resolved"):
        details.append(f"reason: {message['notification_reason']}")
    if message["status"] == "firing" and annotations.get("culprit_sha"):
        title, pr, author = (
            annotations.get(k) or "?" for k in ("culprit_title", "culprit_pr", "culprit_author")
        )
        details.append(f"culprit: {annotations['culprit_range']} {title!r} (#{pr}) by {author}")
    if message["status"] == "firing" and annotations.get("suspect_sha"):
        title, pr = (annotations.get(k) or "?" for k in ("suspect_title", "suspect_pr"))
        details.append(f"suspect (not to blame): {annotations['suspect_range']} {title!r} (#{pr})")
    if message["status"] == "firing" and annotations.get("culprit_verdict"):
        reason = annotations.get("culprit_verdict_reason")
        details.append(f"verdict: {annotations['culprit_verdict']}" + (f" ({reason})" if reason else ""))
    if message["status"] == "firing" and annotations.get("failing_jobs"):
        details.extend(f"failing: {job}" for job in annotations["failing_jobs"].splitlines())
    return "\n".join([line, *(f"{'':18}{d}" for d in details)])


def _digest_line(published: Any) -> str:
    """A daily digest: its day and counts, and each breakage fixed before a page."""
    digest = published.message
    when = published.at.strftime("%Y-%m-%d %H:%M")
    fixed = digest["fixed_before_page"]
    line = (
        f"{when}  DIGEST   {digest['day']}: {len(fixed)} fixed before a page, "
        f"{len(digest['pages'])} page(s), {digest['hours_broken']:g}h broken"
    )
    details = [
        f"fixed before a page: {b['culprit_sha'][:12]} by {b['culprit_author'] or '?'}, "
        f"{b['failed_commits']} commits failed, fixed by {b['fix_sha'][:12]} ({len(b['jobs'])} job(s))"
        for b in fixed
    ]
    return "\n".join([line, *(f"{'':18}{d}" for d in details)])


def _check_config(path: Path) -> int:
    """The file loaded exactly as the deployed functions load theirs."""
    from trunkwatch.app.configuration import load_configuration

    print(f"{path}: valid: {config_summary(load_configuration(path))}")
    return 0


def config_summary(deployment: Deployment) -> str:
    """One line: `100 trunks (97 hud, 3 github; 12 webhook-fed), 2 receivers`."""
    sources = Counter(trunk.source for trunk in deployment.trunks)
    by_source = ", ".join(
        f"{n} {source}" for source, n in sorted(sources.items(), key=lambda s: (-s[1], s[0]))
    )
    fed = sum(trunk.webhook for trunk in deployment.trunks)
    return (
        f"{_count(len(deployment.trunks), 'trunk')} ({by_source}; {fed} webhook-fed), "
        f"{_count(len(deployment.receivers), 'receiver')}"
    )


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"


def _poll(args: argparse.Namespace) -> int:
    from trunkwatch.app.configuration import load_configuration
    from trunkwatch_local import poll_state
    from trunkwatch_local.runtime import LocalRuntime

    deployment = load_configuration(args.config)
    state = args.state or poll_state.default_path(args.config)
    # On moto's table: `trunkwatch poll` keeps the table's items between runs.
    with poll_state.locked(state), LocalRuntime(args.template, store="dynamodb") as runtime:
        runtime.start(deployment)
        if not poll_state.restore(runtime.stack, runtime.pump, state):
            _say(f"poll state starts in {state} (kept between runs; --state chooses another)")
        now = datetime.now(UTC)  # one tick on the real clock
        result = runtime.tick(now)
        for error in result.get("errors", []):
            _say(f"poll of {error['trunk']} failed ({error['cause']}): {error['error']}")
        _print(runtime.published(now), args.json)
        poll_state.save(runtime.stack, state)
        return 1 if result.get("errors") else 0


def _serve(args: argparse.Namespace) -> int:
    from trunkwatch import sources
    from trunkwatch.app.configuration import load_configuration
    from trunkwatch.domain.clock import format_time
    from trunkwatch.domain.config import load_deployment
    from trunkwatch_local.replay import read_replay
    from trunkwatch_local.runtime import LocalRuntime
    from trunkwatch_local.schedule import period_seconds
    from trunkwatch_local.session import Session

    tokens = _tokens(args.tokens) if args.tokens else None
    # Deliveries to POST /webhooks/github are signed with this (GitHub's webhook secret), or
    # carry or are signed with that (the Buildkite webhook's token).
    secret = os.environ.get(WEBHOOK_SECRET_VARIABLE) or None
    buildkite_token = os.environ.get(BUILDKITE_TOKEN_VARIABLE) or None
    runtime = LocalRuntime(
        args.template, webhook_secret=secret, buildkite_token=buildkite_token, store=args.store
    )
    session = Session(runtime, port=args.port, tokens=tokens)
    replay = read_replay(args.scenario) if args.scenario else None
    if args.config:
        deployment = load_configuration(args.config)
    elif replay is not None:
        deployment = session.replaying_from(replay)
    else:
        deployment = load_deployment(
            {"trunks": [{"repo": "pytorch/pytorch", "branch": "main", "url": session.hud.url}]},
            sources=sources.REGISTRY,
        )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # Ctrl-C stops, even when the process started with SIGINT ignored (inherited from its parent).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        session.start(deployment)
        _say(f"API on {session.api_url} (amtool --alertmanager.url={session.api_url})")
        webhook_sources = {trunk.source == BUILDKITE_SOURCE for trunk in deployment.trunks if trunk.webhook}
        for buildkite, ci, variable, given, what in (
            (False, "GitHub", WEBHOOK_SECRET_VARIABLE, secret, "secret"),
            (True, "Buildkite", BUILDKITE_TOKEN_VARIABLE, buildkite_token, "token"),
        ):
            if buildkite in webhook_sources:
                unset = "" if given else f" (set {variable} to the webhook's {what} to accept them)"
                _say(f"{ci} webhook deliveries at {session.api_url}/webhooks/github{unset}")
        if replay is not None:
            from trunkwatch_local.session import replay_into

            for published in replay_into(session, replay):
                print(timeline_line(published), flush=True)
            session.keep_clock()  # serve the scenario's time, not today's
            _say(f"the clock goes on from the scenario's end, {format_time(session.now())}")
        if args.config:
            period = period_seconds(deployment.schedule)
            _say(f"polling {len(deployment.trunks)} trunk(s) every {period:g}s; Ctrl-C stops")
            while not stop.is_set():
                for published in session.serve_tick(session.now()):
                    print(timeline_line(published), flush=True)
                stop.wait(period)
        else:
            _say("serving; Ctrl-C stops")
            stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        session.stop()
    return 0


TOKENS_SHAPE = '{"tokens": [{"sha256": "<hex digest>", "principal": "<name>", "scope": "read" | "write"}]}'


def _tokens(path: Path) -> Any:
    from trunkwatch.api.auth import TokensError, parse_tokens

    try:
        document = json.loads(path.read_text())
    except OSError as err:
        raise ConfigError(f"cannot read tokens file {path}: {err.strerror}") from None
    except ValueError as err:
        raise ConfigError(f"tokens file {path} is not valid JSON: {err}") from None
    try:
        parse_tokens(document)
    except TokensError as err:
        raise ConfigError(f"tokens file {path}: {err} (the shape: {TOKENS_SHAPE})") from None
    return document


if __name__ == "__main__":
    sys.exit(main())
