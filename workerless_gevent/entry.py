"""The one entry function behind every way to start workerless: the console script from pip,
`python -m workerless_gevent` and `bin/workerless`.

gevent must patch the standard library before anything imports ssl, socket, urllib3 or boto3;
otherwise every boto3 call (Lambda Invoke, CloudWatch, DynamoDB) blocks the whole hub. So this
module imports nothing at the top, patches first, and only then imports the CLI.
"""


def main() -> int:
    patch_gevent()
    from .cli import main as run_cli

    return run_cli()


def patch_gevent() -> None:
    """`monkey.patch_all()`, with the installed distributions scanned once instead of once per plugin
    event: gevent looks its plugins up about 25 times while patching, and each lookup reads the metadata
    of every installed distribution (half of the patch's time with a hundred of them)."""
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
