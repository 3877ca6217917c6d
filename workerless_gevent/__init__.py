"""workerless: SQS queues in priority order, delivered to a local HTTP app or a Lambda function."""

__version__ = "0.1.0"
