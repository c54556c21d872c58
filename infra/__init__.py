"""The sample CDK app of this repository: `infra/app.py` and `infra/stack.py`.

It uses the packaged construct (`from relayflow.cdk import RelayflowOrchestrator`), exactly as
an application of your own would.
"""
