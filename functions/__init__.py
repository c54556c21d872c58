"""The sample app's Lambda functions, one folder each; every handler is the package's entry
point, so the logic lives in `relayflow` and these modules hold only what triggers them."""
