"""The one entry function behind every way to start workerless: the console script from pip,
`python -m workerless_gevent` and `bin/workerless`.

gevent must patch the standard library before anything imports ssl, socket, urllib3 or boto3;
otherwise every boto3 call (Lambda Invoke, CloudWatch, DynamoDB) blocks the whole hub. So this
module imports nothing at the top, patches first, and only then imports the CLI.
"""

from __future__ import annotations

from typing import Any

PLUGIN_GROUP = "[gevent.plugins"  # the entry-point groups gevent announces its patch steps to


def main() -> int:
    import os
    import sys

    early = None
    command = sys.argv[1] if len(sys.argv) > 1 else ""  # none: a run configured by WORKERLESS_* alone
    if command not in ("check", "send", "demo", "stats", "redrive", "-h", "--help", "--version"):  # the daemon runs
        from .lifecycle import hangup

        hangup.hold()  # a reload asked for while starting is done once running, instead of ending the process
        from .aws.environment import environment_suffices

        if command and not environment_suffices(os.environ):
            # Region and credentials resolve in a child process while this one patches and imports (aws.child);
            # static keys, a container credentials endpoint, an EC2 instance profile or web identity need none
            # (aws.environment).
            from .aws.child import EarlyResolution

            early = EarlyResolution()
    patch_gevent()
    from .commands.cli import main as run_cli

    return run_cli(early=early)


def patch_gevent() -> None:
    """`monkey.patch_all()`, with gevent's plugins found by one cheap pass over the installed distributions.

    gevent announces each patch step to plugins registered as entry points (gevent registers one itself),
    and looks them up through `importlib.metadata.entry_points`: about 25 lookups, each reading the
    metadata of every installed distribution, after importing importlib.metadata (20 ms alone). Here the
    `entry_points.txt` files on sys.path are read once for the `gevent.plugins.*` groups, and each step goes
    to gevent's in-process subscribers and then to those plugins, as gevent's own lookup does. A zip or egg
    on sys.path, whose metadata only importlib.metadata reads, falls back to gevent's lookup (scanned once)."""
    import sys

    from gevent import events, monkey

    plugins = gevent_plugins(sys.path)
    if plugins is None:
        patch_with_one_scan()
        return

    def notify_and_call_plugins(event: object) -> None:
        events.notify(event)
        for target in plugins.get(getattr(event, "ENTRY_POINT_NAME", ""), ()):
            load(target)(event)

    lookup = events.notify_and_call_entry_points
    events.notify_and_call_entry_points = notify_and_call_plugins
    try:
        monkey.patch_all()
    finally:
        events.notify_and_call_entry_points = lookup


def gevent_plugins(paths: list[str]) -> dict[str, list[str]] | None:
    """`module:attribute` of each gevent plugin by entry-point group, first distribution of a name first;
    None if a zip or egg file on the path may hold more."""
    import os

    found: dict[str, list[str]] = {}
    for path in paths:
        try:
            entries = sorted(os.scandir(path or "."), key=lambda entry: entry.name)
        except NotADirectoryError:
            return None
        except OSError:  # missing or unreadable: importlib.metadata finds nothing there either
            continue
        for entry in entries:
            if not entry.name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(entry.path, "entry_points.txt"), encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except OSError:
                continue
            if PLUGIN_GROUP in text:
                for group, target in entry_point_lines(text):
                    if group.startswith(PLUGIN_GROUP[1:]) and target not in found.setdefault(group, []):
                        found[group].append(target)
    return found


def entry_point_lines(text: str) -> list[tuple[str, str]]:
    """(group, "module:attribute") of an entry_points.txt, extras dropped."""
    pairs, group = [], ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1].strip()
        elif "=" in line and group and not line.startswith(("#", ";")):
            target = line.partition("=")[2].partition("[")[0].strip()
            pairs.append((group, target))
    return pairs


def load(target: str) -> Any:
    import importlib

    module, _, attributes = target.partition(":")
    value: Any = importlib.import_module(module.strip())
    for name in filter(None, attributes.strip().split(".")):
        value = getattr(value, name)
    return value


def patch_with_one_scan() -> None:
    """gevent's own plugin lookups, served from one scan of the installed distributions."""
    from importlib import metadata

    from gevent import monkey

    scan = metadata.entry_points
    everything = scan()

    def entry_points(**selection: str) -> metadata.EntryPoints:
        # Without a selection, what the scan itself returned (a SelectableGroups before Python 3.12).
        return everything.select(**selection) if selection else everything  # type: ignore[return-value]

    metadata.entry_points = entry_points  # type: ignore[assignment]
    try:
        monkey.patch_all()
    finally:
        metadata.entry_points = scan
