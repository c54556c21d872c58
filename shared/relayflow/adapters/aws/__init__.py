"""AWS adapters of the orchestrator ports: DynamoDB, S3, EventBridge Scheduler and Lambda.

This package is the only one that imports boto3/botocore; clients are created lazily through
:class:`~relayflow.adapters.aws.clients.AwsClients`, so tests can inject moto-backed ones.
"""

from relayflow.adapters.aws.wiring import build_aws_driver

__all__ = ["build_aws_driver"]
