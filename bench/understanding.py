"""How well the built-in assistant (assistant/local/intents.py) understands words nobody here wrote: public sets of
requests to voice assistants, their train and dev (validation) splits only, and notification texts shaped like
those real tools send (bench/notifications.txt). docs/explanation/local-assistant.md reports the figures.

The data stays out of the repository. Extract it once from the public snapshots (git directories) of
xliuhw/NLU-Evaluation-Data (HWU64: its first cross-validation fold's train set), clinc/oos-eval (train and val, in
and out of scope) and sonos/nlu-benchmark (the 2017 train and validate files), then measure:

    .venv/bin/python -m bench.understanding extract --hwu DIR --clinc DIR --snips DIR --into /work/shared/datasets
    UNDERSTANDING_DATA=/work/shared/datasets .venv/bin/python -m bench.understanding [--split dev] [--misses 20]

Each extracted file holds "label<TAB>text" lines. A label maps to the intents that would be a right reading of it
(HWU64 files a "remind me" under calendar_set, so a reminder or an event is right there); a label that maps to
nothing is a request of a kind the assistant does not claim, and any reading of it counts as acting wrongly. A
test split is never extracted."""

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

import django

from assistant.local import dates, times
from assistant.local.intents import intent_name, understand

NOW = datetime(2026, 11, 25, 10, 0)  # a Wednesday morning, local
TOOLS = {
    "schedule_reminder", "list_reminders", "cancel_reminder", "list_webhook_triggers", "calendar_list_events",
    "calendar_create_event", "mail_search", "mail_send",
}  # fmt: skip
EVENT_OR_REMINDER = {"schedule_reminder", "calendar_create_event"}
# What each claimed label of the public sets may rightly be read as; every other label claims nothing.
RIGHT: dict[str, set[str]] = {
    "hwu:alarm_set": {"schedule_reminder"},
    "hwu:alarm_query": {"list_reminders"},
    "hwu:alarm_remove": {"cancel_reminder"},
    "hwu:calendar_set": EVENT_OR_REMINDER,
    "hwu:calendar_query": {"calendar_list_events", "list_reminders"},
    "hwu:calendar_remove": {"cancel_reminder", "change_events"},
    "hwu:email_query": {"mail_search"},
    "hwu:email_sendemail": {"mail_send", "other_mail"},
    "clinc:alarm": {"schedule_reminder", "list_reminders", "cancel_reminder"},
    "clinc:reminder": {"list_reminders"},
    "clinc:reminder_update": {"schedule_reminder", "cancel_reminder"},
    "clinc:calendar": {"calendar_list_events", "list_reminders"},
    "clinc:calendar_update": {"calendar_create_event", "change_events", "schedule_reminder", "cancel_reminder"},
    "clinc:meeting_schedule": {"calendar_list_events"},
    "clinc:schedule_meeting": {"calendar_create_event"},
    "clinc:what_can_i_ask_you": {"help"},
}
# Labels that claim nothing but where a reading is still a right one ("remind me to do the laundry" filed under a
# to-do list); they count neither for nor against recall.
TOLERATED: dict[str, set[str]] = {
    "clinc:todo_list_update": {"schedule_reminder"},
    "clinc:translate": {"summarize"},  # "how do you say … in French": a translation, which it declines
    "clinc:timer": {"schedule_reminder"},  # "wake me in an hour", "remind me in ten minutes"
    "clinc:todo_list": {"list_reminders"},
    "hwu:general_explain": {"summarize"},
    "hwu:qa_definition": {"summarize"},
}
SPLITS = {"train": ("hwu64-train", "clinc-train", "snips-train"), "dev": ("clinc-val", "snips-validate")}
HERE = Path(__file__).resolve().parent


# --- extraction -------------------------------------------------------------------------------------------------


def _show(git_dir: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"HEAD:{path}"], capture_output=True, text=True, check=True
    ).stdout


def _files(git_dir: str) -> list[str]:
    listed = subprocess.run(
        ["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.splitlines()


def hwu_train(git_dir: str) -> Iterator[tuple[str, str]]:
    for path in _files(git_dir):
        if "/KFold_1/trainset/" in path and path.endswith(".csv"):  # never the fold's testset
            for row in csv.DictReader(io.StringIO(_show(git_dir, path)), delimiter=";"):
                yield f"hwu:{row['scenario']}_{row['intent']}", row["answer_from_user"] or row["answer_from_anno"]


def clinc(git_dir: str, split: str) -> Iterator[tuple[str, str]]:
    data = json.loads(_show(git_dir, "data/data_full.json"))
    for text, label in data[split] + data[f"oos_{split}"]:
        yield f"clinc:{label}", text


def snips(git_dir: str, split: str) -> Iterator[tuple[str, str]]:
    prefix = {"train": "train_", "validate": "validate_"}[split]
    for path in _files(git_dir):
        name = path.rsplit("/", 1)[-1]
        if path.startswith("2017-06-custom-intent-engines/") and name.startswith(prefix) and "_full" not in name:
            for intent, examples in json.loads(_show(git_dir, path)).items():
                for example in examples:
                    yield f"snips:{intent}", "".join(part["text"] for part in example["data"])


def _write(rows: Iterable[tuple[str, str]], path: Path) -> int:
    lines = [f"{label}\t{' '.join(text.split())}" for label, text in rows if text.strip()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def extract(options: argparse.Namespace) -> None:
    into = Path(options.into)
    into.mkdir(parents=True, exist_ok=True)
    written = {
        "hwu64-train": _write(hwu_train(options.hwu), into / "hwu64-train.tsv"),
        "clinc-train": _write(clinc(options.clinc, "train"), into / "clinc-train.tsv"),
        "clinc-val": _write(clinc(options.clinc, "val"), into / "clinc-val.tsv"),
        "snips-train": _write(snips(options.snips, "train"), into / "snips-train.tsv"),
        "snips-validate": _write(snips(options.snips, "validate"), into / "snips-validate.tsv"),
    }
    print(json.dumps(written))


# --- measuring ----------------------------------------------------------------------------------------------------


def examples(folder: Path, names: Iterable[str]) -> list[tuple[str, str]]:
    found = []
    for name in names:
        path = folder / f"{name}.tsv"
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                label, _, text = line.partition("\t")
                found.append((label, text))
    return found


def notifications() -> list[tuple[str, str]]:
    """The notification fixture: a blank line between messages, and a message's first line its label."""
    found = []
    for block in (HERE / "notifications.txt").read_text(encoding="utf-8").split("\n\n"):
        label, _, text = block.strip().partition("\n")
        if label and not label.startswith("#"):
            found.append((label, text))
    return found


def _right(label: str) -> set[str]:
    """The right readings of a label; "want:NAME" (the notification fixture's requests) wants that intent."""
    if label.startswith("want:"):
        return {label.removeprefix("want:")}
    return RIGHT.get(label) or TOLERATED.get(label) or set()


def measure(data: list[tuple[str, str]], misses: int = 0) -> dict[str, object]:
    """Precision of what it reads (right / read), recall of the claimed labels, and how often it reads anything into
    a message of a kind it does not claim; ``misses``: print that many wrong readings and missed requests."""
    read: Counter[str] = Counter()
    right_by_intent: Counter[str] = Counter()
    claimed: Counter[str] = Counter()
    understood: Counter[str] = Counter()
    other, acted_other = 0, 0
    wrong: list[tuple[str, ...]] = []
    missed: list[tuple[str, ...]] = []
    for label, text in data:
        name = intent_name(understand(text, NOW, TOOLS))
        right = _right(label)
        if label in RIGHT or label.startswith("want:"):
            claimed[label] += 1
            understood[label] += name in right
            if name is None:
                missed.append((label, text))
        elif label not in TOLERATED:
            other += 1
            acted_other += name is not None
        if name is not None:
            read[name] += 1
            right_by_intent[name] += name in right
            if name not in right:
                wrong.append((label, name, text))
    for line in wrong[:misses]:
        print("WRONG", *line, sep="\t", file=sys.stderr)
    for line in missed[:misses]:
        print("MISSED", *line, sep="\t", file=sys.stderr)
    return {
        "precision": round(sum(right_by_intent.values()) / max(1, sum(read.values())), 4),
        "recall": round(sum(understood.values()) / max(1, sum(claimed.values())), 4),
        "acted_on_other": round(acted_other / max(1, other), 5),
        "claimed": sum(claimed.values()),
        "other": other,
        "per_intent": {name: [read[name], round(right_by_intent[name] / read[name], 3)] for name in sorted(read)},
        "per_label": {
            label: [claimed[label], round(understood[label] / claimed[label], 3)] for label in sorted(claimed)
        },
    }


def latency(data: list[tuple[str, str]], rounds: int = 3) -> dict[str, float]:
    """Milliseconds per understanding over every message (cut at 400 characters), ``rounds`` times: the CPU time of
    this thread (what the work costs; a busy machine's other programs do not count) and the time on the clock."""
    texts = [text[:400] for _, text in data]
    for text in texts:
        understand(text, NOW, TOOLS)  # warm: imports, compiled expressions, dateparser's first load
    cpu, wall = [], []
    for _ in range(rounds):
        for text in texts:
            started, started_cpu = time.perf_counter(), time.thread_time()
            understand(text, NOW, TOOLS)
            cpu.append((time.thread_time() - started_cpu) * 1000)
            wall.append((time.perf_counter() - started) * 1000)
    cpu.sort()
    wall.sort()
    return {
        "messages": len(cpu),
        "cpu_p50_ms": round(cpu[len(cpu) // 2], 4),
        "cpu_p99_ms": round(cpu[int(len(cpu) * 0.99)], 4),
        "wall_p50_ms": round(wall[len(wall) // 2], 4),
        "wall_p99_ms": round(wall[int(len(wall) * 0.99)], 4),
        "wall_max_ms": round(wall[-1], 2),
        "load_average": round(os.getloadavg()[0], 2),
    }


# Times as the reminders above say them, once the bare hours are resolved (what times.py hands the readers).
PHRASES = (
    "tomorrow at 12:00", "in 20 minutes", "on friday at 13:00", "at 15:30", "tomorrow at 09:30", "on dec 3 at 17:00",
    "in 1 hour", "today at 20:00", "on the 13th at 12:00", "at 06:30 tomorrow",
)  # fmt: skip


def date_readers(rounds: int = 20) -> dict[str, object]:
    """assistant/local/dates.py beside dateparser on the same phrases: CPU milliseconds per phrase, and where they
    read a different minute."""
    times.with_dateparser("tomorrow", NOW)  # dateparser's first load (over a second) is not counted
    readers = {"dates.py": dates.read, "dateparser": times.with_dateparser}
    found: dict[str, object] = {}
    for name, reader in readers.items():
        costs = []
        for _ in range(rounds):
            for phrase in PHRASES:
                started = time.thread_time()
                reader(phrase, NOW)
                costs.append((time.thread_time() - started) * 1000)
        costs.sort()
        found[name] = {
            "cpu_p50_ms": round(costs[len(costs) // 2], 4),
            "cpu_p99_ms": round(costs[int(len(costs) * 0.99)], 3),
        }
    differently: dict[str, list[str]] = {}
    for phrase in PHRASES:
        minutes = [f"{(reader(phrase, NOW) or (None, ''))[0]}"[:16] for reader in readers.values()]
        if minutes[0] != minutes[1]:
            differently[phrase] = minutes
    found["read_differently"] = differently
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command")
    extracting = commands.add_parser("extract")
    for name in ("hwu", "clinc", "snips", "into"):
        extracting.add_argument(f"--{name}", required=True)
    parser.add_argument("--data", default=os.environ.get("UNDERSTANDING_DATA", "/work/shared/datasets"))
    parser.add_argument("--split", choices=sorted(SPLITS), default="dev")
    parser.add_argument("--misses", type=int, default=0)
    parser.add_argument("--speed", action="store_true", help="also time every understanding")
    options = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")  # times are said in the person's locale
    os.environ.setdefault("DEBUG", "1")  # no database is opened: understanding touches none
    django.setup()
    if options.command == "extract":
        extract(options)
        return
    data = examples(Path(options.data), SPLITS[options.split])
    if not data:
        print(f"No data under {options.data}: extract it first (see this script's help). Skipped.")
        return
    read_by_dateparser: list[str] = []
    with_dateparser = getattr(times, "with_dateparser", None)  # absent from a checkout before dates.py
    if with_dateparser is not None:

        def counted(phrase: str, now: datetime) -> tuple[datetime | None, str]:
            read_by_dateparser.append(phrase)
            return with_dateparser(phrase, now)

        times.with_dateparser = counted
    results = {"split": options.split, "messages": len(data), "public": measure(data, options.misses)}
    results["times_read_by_dateparser"] = len(read_by_dateparser)  # the rest: assistant/local/dates.py
    results["notifications"] = measure(notifications(), options.misses)
    if options.speed:
        results["speed"] = latency(data + notifications())
        results["date_readers"] = date_readers()
    for name, value in results.items():
        if isinstance(value, dict):
            lines = [f"  {key}: {json.dumps(inner)}" for key, inner in value.items()]
            print(f"{name}:", *lines, sep="\n")
        else:
            print(f"{name}: {value}")


if __name__ == "__main__":
    main()
