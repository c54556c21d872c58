"""The api function: the HTTP API.

Triggered by: API Gateway (HTTP API, payload 2.0), every route under `/api`.
IAM grants: read/write the runs and manifests tables, get/put/delete payload objects, create,
update, get, delete and list schedules, send to the alarm queue, pass the alarm role to
Scheduler, invoke the drive function and the step host functions, read the API token secret.
"""

from relayflow.entrypoints.api import lambda_handler

__all__ = ["lambda_handler"]
