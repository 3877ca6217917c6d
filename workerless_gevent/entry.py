"""The one entry function behind every way to start workerless: the console script from pip,
`python -m workerless_gevent` and `bin/workerless`.

gevent must patch the standard library before anything imports ssl, socket, urllib3 or boto3;
otherwise every boto3 call (Lambda Invoke, CloudWatch, DynamoDB) blocks the whole hub. So this
module imports nothing at the top, patches first, and only then imports the CLI.
"""


def main() -> int:
    from gevent import monkey

    monkey.patch_all()
    from .cli import main as run_cli

    return run_cli()
