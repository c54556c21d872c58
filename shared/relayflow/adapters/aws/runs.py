"""The run store's former module; it lives in :mod:`relayflow.adapters.aws.runstore` (this
path keeps working)."""

from relayflow.adapters.aws.runstore import DynamoDBRunStore

__all__ = ["DynamoDBRunStore"]
