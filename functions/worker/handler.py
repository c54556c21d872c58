"""The worker function: hosts workflow bodies and answers step requests.

Triggered by: synchronous invokes from the Lambda dispatcher (the api, drive and sweeper
functions).
IAM grants: get/put payload objects under the payload prefix, PutItem on the runs table (the
per-step checkpoint log and step rate limits), GetItem on its `#rate#` keys only.
"""

from relayflow.entrypoints.worker import lambda_handler

__all__ = ["lambda_handler"]
