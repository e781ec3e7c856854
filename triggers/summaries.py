"""One readable line about what a well-known sender posted, for the message a trigger records: GitHub's webhooks
(named by their X-GitHub-Event header, or recognised by shape) and Prometheus Alertmanager's. Anything else gets
no summary; the whole payload goes to the assistant as context either way.

Every value is read defensively (a payload is whatever a sender posts) and cut short, on one line."""

import re
from typing import Any

_MAX_PART = 120
# Control characters other than whitespace: a value from a header (X-GitHub-Event), which the body's rules never see,
# may hold a NUL (which PostgreSQL cannot store) or a terminal's escape sequence.
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")


def _text(value: Any) -> str:
    """A payload value as a short single line, '' for anything that is not a string or number."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return ""
    line = " ".join(_CONTROL.sub("", str(value)).split())
    return line if len(line) <= _MAX_PART else line[: _MAX_PART - 1] + "…"


def _first_line(value: Any) -> str:
    return _text(value.strip().splitlines()[0]) if isinstance(value, str) and value.strip() else ""


def _get(payload: Any, *path: str) -> Any:
    for name in path:
        if not isinstance(payload, dict):
            return None
        payload = payload.get(name)
    return payload


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _quoted(text: str) -> str:
    return f"“{text}”" if text else ""


def _joined(*parts: str) -> str:
    return " ".join(part for part in parts if part)


def github_event_of(payload: dict[str, Any]) -> str | None:
    """The GitHub event a payload without the X-GitHub-Event header looks like, if any."""
    if not isinstance(payload.get("repository"), dict):
        return None
    if "ref" in payload and ("commits" in payload or "head_commit" in payload or "pusher" in payload):
        return "push"
    for event in ("pull_request", "issue_comment", "workflow_run", "release", "issue"):
        key = "comment" if event == "issue_comment" else event
        if isinstance(payload.get(key), dict):
            return "issues" if event == "issue" else event
    return None


def _by(login: str) -> str:
    return f"by {login}" if login else ""


def _push(payload: dict[str, Any], repo: str, action: str, sender: str) -> str:
    branch = _text(payload.get("ref")).removeprefix("refs/heads/").removeprefix("refs/tags/")
    commits = payload.get("commits")
    count = _plural(len(commits), "commit") if isinstance(commits, list) else ""
    pusher = _text(_get(payload, "pusher", "name")) or sender
    head = _first_line(_get(payload, "head_commit", "message"))
    where = f"to {repo}" + (f" {branch}" if branch else "")
    return _joined("GitHub push", where + ":", count, _by(pusher), _quoted(head)).rstrip(":")


def _pull_request(payload: dict[str, Any], repo: str, action: str, sender: str) -> str:
    number = _text(_get(payload, "pull_request", "number") or payload.get("number"))
    title = _text(_get(payload, "pull_request", "title"))
    merged = action == "closed" and _get(payload, "pull_request", "merged") is True
    state = "merged" if merged else action
    return _joined(f"GitHub pull request #{number}", state, f"in {repo}:", _quoted(title), _by(sender))


def _issue(payload: dict[str, Any], repo: str, action: str, sender: str) -> str:
    number = _text(_get(payload, "issue", "number"))
    title = _text(_get(payload, "issue", "title"))
    return _joined(f"GitHub issue #{number}", action, f"in {repo}:", _quoted(title), _by(sender))


def _issue_comment(payload: dict[str, Any], repo: str, action: str, sender: str) -> str:
    number = _text(_get(payload, "issue", "number"))
    author = _text(_get(payload, "comment", "user", "login")) or sender
    body = _first_line(_get(payload, "comment", "body"))
    return _joined("GitHub comment", _by(author), f"on #{number} in {repo}:", _quoted(body))


def _workflow_run(payload: dict[str, Any], repo: str, action: str, sender: str) -> str:
    name = _text(_get(payload, "workflow_run", "name"))
    conclusion = _text(_get(payload, "workflow_run", "conclusion"))
    branch = _text(_get(payload, "workflow_run", "head_branch"))
    return _joined(
        "GitHub workflow", _quoted(name), action, f"({conclusion})" if conclusion else "", f"in {repo}",
        f"on {branch}" if branch else "",
    )  # fmt: skip


def _release(payload: dict[str, Any], repo: str, action: str, sender: str) -> str:
    return _joined("GitHub release", _text(_get(payload, "release", "tag_name")), action, f"in {repo}", _by(sender))


def _ping(payload: dict[str, Any], repo: str, action: str, sender: str) -> str:
    return _joined("GitHub ping for", repo + ":", _quoted(_text(payload.get("zen"))))


_GITHUB_EVENTS = {
    "push": _push,
    "pull_request": _pull_request,
    "issues": _issue,
    "issue_comment": _issue_comment,
    "workflow_run": _workflow_run,
    "release": _release,
    "ping": _ping,
}


def _github(event: str, payload: dict[str, Any]) -> str:
    repo = _text(_get(payload, "repository", "full_name")) or "a repository"
    action = _text(payload.get("action"))
    sender = _text(_get(payload, "sender", "login"))
    summary = _GITHUB_EVENTS.get(event)
    if summary is not None:
        return summary(payload, repo, action, sender)
    return _joined(f"GitHub {_text(event) or 'event'}", f"({action})" if action else "", f"in {repo}", _by(sender))


def is_alertmanager(payload: dict[str, Any]) -> bool:
    return isinstance(payload.get("alerts"), list) and ("receiver" in payload or "groupKey" in payload)


def _alertmanager(payload: dict[str, Any]) -> str:
    alerts = [alert for alert in payload["alerts"] if isinstance(alert, dict)]
    firing = sum(1 for alert in alerts if alert.get("status") == "firing")
    resolved = sum(1 for alert in alerts if alert.get("status") == "resolved")
    counts = ", ".join(
        part for part in (f"{firing} firing" if firing else "", f"{resolved} resolved" if resolved else "") if part
    )
    labels = payload.get("commonLabels")
    common: dict[str, Any] = labels if isinstance(labels, dict) else {}
    first = alerts[0] if alerts else {}
    name = _text(common.get("alertname")) or _text(_get(first, "labels", "alertname"))
    severity = _text(common.get("severity")) or _text(_get(first, "labels", "severity"))
    summary = _text(_get(payload, "commonAnnotations", "summary")) or _text(_get(first, "annotations", "summary"))
    head = f"Alertmanager: {_plural(len(alerts), 'alert')}" + (f" ({counts})" if counts else "")
    what = _joined(name, f"[{severity}]" if severity else "")
    return head + (f": {what}" if what else "") + (f": {_quoted(summary)}" if summary else "")


def summarise(payload: Any, github_event: str | None = None) -> str:
    """One line about the payload from a sender we recognise; '' for anything else."""
    if not isinstance(payload, dict):
        return ""
    event = _text(github_event) or github_event_of(payload)  # a header of nothing printable: as if it were absent
    if event:
        return _github(event, payload)
    if is_alertmanager(payload):
        return _alertmanager(payload)
    return ""
