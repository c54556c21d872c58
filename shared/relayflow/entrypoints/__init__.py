"""The deployed Lambda functions' entry points, one module each, holding only its wiring.

Each module's ``lambda_handler`` is what the CDK construct points its function at
(``relayflow.entrypoints.<name>.lambda_handler``); the logic lives in the package.
"""
