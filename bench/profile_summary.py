"""py-spy's collapsed stacks -> CPU by package folder, by area, and the top frames. Where a sample goes is read
from its frames' paths and qualified names, never from a list of files, so a moved module counts under its new
folder; "other" holds only samples without a frame of ours. Pure (reads one file), so tests/unit can check it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGE = "workerless_gevent"
TOP_LEVEL = "top level"  # the package's own modules: daemon.py, setup.py, metrics.py, ...
BASELINE = "bench/baseline.py"
HUB = "gevent hub, switching, I/O wait wake-ups"
OTHER = "other (no frame of workerless_gevent or the baseline)"
ROOT = Path(__file__).resolve().parents[1]
# A class named *Wire speaks one AWS service: the method called names the action (but these inner ones).
WIRE_SUFFIX = "Wire"
WIRE_INNER_METHODS = frozenset({"call", "call_once", "invoke_once"})
SERVICES = {"Sqs": "SQS"}
# What a module does inside a wire call; a module not named here is shown by its name alone.
WIRE_PART_NAMES = {"wire.http": "HTTP request and response", "wire.sigv4": "SigV4 signing",
                   "wire.retries": "retry bookkeeping"}
# Frames only signing reaches in botocore (its credentials are also what the wire's signer reads).
BOTOCORE_SIGNING = ("botocore/auth.py", "botocore/awsrequest.py", "botocore/credentials.py", "botocore/compat.py",
                    "botocore/utils.py")
HTTP_CLIENT_LIBRARY = "geventhttpclient/"
# A delivery: a target of TARGETS with an HTTP client of WIRE (or geventhttpclient) below it.
TARGETS, WIRE = "targets/", "wire/"
# Left out of the inclusive table: every sample of their process is under them.
OUTER_LOOPS = frozenset({"<module>", "main", "run", "Daemon.run"})
STDLIB = re.compile(r"lib/python3\.\d+/")

@dataclass(frozen=True)
class Frame:
    """One py-spy frame: 'SqsWire.receive_message (workerless_gevent/wire/sqs.py:96)'."""

    function: str  # the qualified name
    path: str
    text: str  # the frame as shown in the tables, the checkout's own path left out

    @property
    def inside(self) -> str | None:
        """The path inside the package ('wire/sqs.py'), or None for a frame of another package."""
        parts = self.path.split("/")
        if PACKAGE not in parts[:-1]:
            return None
        at = len(parts) - 1 - parts[::-1].index(PACKAGE)
        return "/".join(parts[at + 1:])

    @property
    def folder(self) -> str | None:
        """The package folder ('wire/') or TOP_LEVEL; BASELINE for the baseline; None for other code."""
        inside = self.inside
        if inside is None:
            return BASELINE if self.path.endswith("baseline.py") else None
        return inside.split("/", 1)[0] + "/" if "/" in inside else TOP_LEVEL

    @property
    def module(self) -> str:
        """'wire.sqs' for a frame of the package; the path for any other."""
        inside = self.inside
        return inside.removesuffix(".py").replace("/", ".") if inside is not None else self.path

    @property
    def owner(self) -> str | None:
        """The class of a method ('SqsWire'), None for a plain function."""
        parts = self.function.split(".")
        return parts[0] if len(parts) > 1 and parts[1] != "<locals>" else None

    @property
    def method(self) -> str:
        return self.function.split(".")[1] if self.owner else self.function

    def is_in(self, library: str) -> bool:
        """Whether the frame is in that library ('gevent', 'json'), by a folder of its path."""
        return library in self.path.split("/")[:-1]

    @property
    def is_wire(self) -> bool:
        return self.folder not in (None, BASELINE) and (self.owner or "").endswith(WIRE_SUFFIX)

def parse_frame(frame: str) -> Frame:
    name, _, location = frame.partition(" (")
    location = location.rstrip(")")
    path = location.rsplit(":", 1)[0] if location[-1:].isdigit() else location
    for marker in ("site-packages/", str(ROOT) + "/"):
        if marker in location:
            location = location.split(marker, 1)[1]
    location = STDLIB.split(location, 1)[-1]
    return Frame(name, path, f"{name} ({location})" if location else name)

def folder_of(frames: list[Frame]) -> str:
    """The folder of the innermost frame of ours: the libraries a function calls count to its folder."""
    own = [frame for frame in frames if frame.folder is not None]
    if own:
        return own[-1].folder or OTHER
    return HUB if any(frame.is_in("gevent") for frame in frames) else OTHER

def area_of(frames: list[Frame]) -> str:
    """The first of: the AWS call the sample is in (through a wire class or botocore, its signing and
    HTTP exchange included), the delivery to the target (the target and its HTTP client), our own code
    by folder and function, the gevent hub."""
    for index, frame in enumerate(frames):
        caller = frames[index - 1].text if index else "?"
        if frame.is_wire:
            return f"{wire_call(frame)} via {frame.module}, from {caller}"
        if "botocore/" in frame.path:
            inner = [f for f in frames[index:] if "botocore/" in f.path]
            if index == 0 and any("botocore/auth.py" in f.path for f in inner) \
                    and all(any(marker in f.path for marker in BOTOCORE_SIGNING) for f in inner):
                return "SigV4 signing (botocore.auth), the AWS call above it not in the stack"
            return f"AWS call via botocore, from {caller}"
    delivery = delivery_of(frames)
    if delivery is not None:
        return delivery
    own = [frame for frame in frames if frame.folder is not None]
    if own:
        return f"own code in {own[-1].folder}: {own[-1].function}"
    if any(HTTP_CLIENT_LIBRARY in frame.path for frame in frames):
        return "HTTP client (geventhttpclient), caller not in the stack"
    return folder_of(frames)

def wire_call(frame: Frame) -> str:
    """'SQS ReceiveMessage' for the outermost frame of SqsWire.receive_message."""
    service = frame.owner.removesuffix(WIRE_SUFFIX) if frame.owner else "?"
    if frame.method in WIRE_INNER_METHODS:
        return f"{SERVICES.get(service, service)} call (action not in the stack)"
    action = "".join(word.capitalize() for word in frame.method.split("_"))
    return f"{SERVICES.get(service, service)} {action}"

def delivery_of(frames: list[Frame]) -> str | None:
    """A target of targets/ (or the baseline's slot) with an HTTP client below it: the delivery."""
    start = next((index for index, frame in enumerate(frames) if frame.folder in (TARGETS, BASELINE)), None)
    if start is None:
        return None
    client = next((frame for frame in frames[start:] if frame.folder == WIRE or HTTP_CLIENT_LIBRARY in frame.path),
                  None)
    if client is None:
        return None
    target = frames[start].module if frames[start].folder == TARGETS else "the baseline's slot"
    through = client.module if client.folder == WIRE else "geventhttpclient"
    return f"delivery to the target ({target} through {through})"

def wire_part(frames: list[Frame]) -> str | None:
    """Inside a wire call, the module of the package where the time goes (the HTTP exchange, signing),
    or for the wire class's own module: JSON, parsing, its own code."""
    start = next((index for index, frame in enumerate(frames) if frame.is_wire), None)
    if start is None:
        return None
    inner = frames[start:]
    last = [frame for frame in inner if frame.folder is not None][-1]
    if last.module != frames[start].module:
        return f"{WIRE_PART_NAMES.get(last.module, 'code')} ({last.module})"
    below = inner[inner.index(last) + 1:]
    if any(frame.is_in("json") for frame in below):
        return "JSON encode/decode (json.dumps, json.loads)"
    if last.function.startswith("parse"):
        return f"parsing ({last.module}.parse_*)"
    return f"{frames[start].owner} own code ({last.module})"

def summarize_profile(path: Path, cpu_us_per_msg: float | None, top: int = 15) -> dict[str, Any]:
    """py-spy raw (collapsed) stacks -> CPU by folder, by area, inside the wire calls, and top frames.

    py-spy drops idle samples, so a share of samples is a share of CPU time; times the CPU per
    message measured from /proc during the same run, it is microseconds per message."""
    tables: dict[str, dict[str, int]] = {"by_folder": {}, "by_area": {}, "wire_call_parts": {}, "top_self": {},
                                         "top_inclusive_own_code": {}}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [parse_frame(text) for text in stack.split(";")]
        part = wire_part(frames)
        keys = {"by_folder": [folder_of(frames)], "by_area": [area_of(frames)], "top_self": [frames[-1].text],
                "wire_call_parts": [part] if part else [],
                "top_inclusive_own_code": sorted({f.text for f in frames if f.folder is not None
                                                  and f.function not in OUTER_LOOPS})}
        for table, names in keys.items():
            for name in names:
                tables[table][name] = tables[table].get(name, 0) + count

    def ranked(counts: dict[str, int], limit: int | None) -> list[dict[str, Any]]:
        rows = sorted(counts.items(), key=lambda item: -item[1])[:limit]
        return [{"function": name, "share": count / total,
                 "us_per_msg": count / total * cpu_us_per_msg if cpu_us_per_msg else None} for name, count in rows]

    summary: dict[str, Any] = {"samples": total, "cpu_us_per_msg": cpu_us_per_msg}
    for table, counts in tables.items():
        summary[table] = ranked(counts, None if table == "by_folder" else top)
    return summary
