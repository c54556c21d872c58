"""The DynamoDB run store: :class:`DynamoDBRunStore` is its one public class.

Its private modules, by concern: ``_keys`` (item and index keys), ``_codec`` (how a record
splits into a header document and parts, and their compression), ``_pages`` (page items and
the chain of page sets), ``_header`` (the header item), ``_snapshot`` (what the store
remembers of a stored version and how a new record differs from it), ``_index_queries``
(listing and due runs), ``_upkeep`` (page writes, deletions and expiry stamps) and ``_store``
(the store itself).
"""

from relayflow.adapters.aws.runstore._store import DynamoDBRunStore

__all__ = ["DynamoDBRunStore"]
