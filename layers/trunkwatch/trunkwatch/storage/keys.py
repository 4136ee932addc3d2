"""Every key of the table is built here (the key design is in this package's docstring)."""

from __future__ import annotations

SEQ_DIGITS = 8


def seq_key(seq: int) -> str:
    """Commit positions sort as text: zero-padded."""
    return f"{seq:0{SEQ_DIGITS}d}"


def trunk(trunk_id: str) -> str:
    """The trunk's own small items: state, job index, source state."""
    return f"TRUNK#{trunk_id}"


def commits(trunk_id: str) -> str:
    return f"COMMITS#{trunk_id}"


def cells(trunk_id: str, job: str) -> str:
    """One partition per job: the evaluator's Query reads only the job it judges."""
    return f"CELLS#{trunk_id}#{job}"


def commit_sha(trunk_id: str, sha: str) -> str:
    """A trunk commit's seq by its sha (what a webhook delivery names it by)."""
    return f"SHA#{trunk_id}#{sha}"


def shards(trunk_id: str, sha: str, job: str) -> str:
    """The shards a job ran as on one commit, as webhook deliveries reported them."""
    return f"SHARDS#{trunk_id}#{sha}#{job}"


def run(trunk_id: str, run_id: int) -> str:
    """A workflow run a delivery told of, and the job reports held until it is known."""
    return f"RUN#{trunk_id}#{run_id}"


def held(name: str, attempt: int, status: str) -> str:
    """A job report held under its run, by job, attempt and status (a redelivery is one item)."""
    return f"HELD#{name}#{attempt}#{status}"


HELD_PREFIX = "HELD#"


def alerts(trunk_id: str) -> str:
    return f"ALERTS#{trunk_id}"


def alert(alertname: str, job: str | None) -> str:
    return f"{alertname}#{job or '-'}"


def episodes(trunk_id: str) -> str:
    """A trunk's job alert episodes, by start: one Query reads its history."""
    return f"EPISODES#{trunk_id}"


def episode(starts_at: str, job: str) -> str:
    return f"{starts_at}#{job}"


def fixed(trunk_id: str) -> str:
    """A trunk's breakages fixed before they could page: one Query reads its month."""
    return f"FIXED#{trunk_id}"


def fixed_episode(culprit_sha: str, job: str) -> str:
    """One per job and culprit: recording it again replaces it."""
    return f"{culprit_sha}#{job}"


def reruns(trunk_id: str) -> str:
    return f"RERUNS#{trunk_id}"


def rerun(job: str, episode: str, role: str) -> str:
    """A rerun by its job, episode (the alert's start) and role: an episode's sort together."""
    return f"{job}#{episode}#{role}"


def logs(trunk_id: str) -> str:
    return f"LOG#{trunk_id}"


def log(receiver: str, fingerprint: str) -> str:
    return f"{receiver}#{fingerprint}"


def log_prefix(receiver: str) -> str:
    return f"{receiver}#"


# A rejection's sort key in the log partition: no receiver is named REJECTED (each is named
# `<type>:...` or trunkwatch-sns), so a receiver's entries and the rejections never mix.
REJECTIONS = "REJECTED#"


def rejection(receiver: str, fingerprint: str) -> str:
    return f"{REJECTIONS}{receiver}#{fingerprint}"


def acks(trunk_id: str) -> str:
    """A trunk's acknowledgements, one per alert fingerprint (sk: the fingerprint): a
    partition of their own, so the API may write them and nothing of the notification logs."""
    return f"ACKS#{trunk_id}"


def ticks(trunk_id: str) -> str:
    return f"TICK#{trunk_id}"


STATE = "STATE"
RUN = "RUN"
JOBS = "JOBS"
SOURCE = "SOURCE"
SEQ = "SEQ"
SILENCES = "SILENCE"
SILENCE_AUDIT = "SILENCE#AUDIT"

# DynamoDB's TTL attribute (epoch seconds) of every kind that expires.
TTL_ATTRIBUTE = "expires_at"
