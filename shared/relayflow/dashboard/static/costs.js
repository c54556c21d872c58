// A run's cost on its page: the total and its parts by service in dollars, and the usage
// (AWS billing units) it was priced from, as the run detail gives them.

import { h } from "./dom.js";

const USAGE_LABELS = [
  ["dynamodbWriteUnits", "DynamoDB write units"],
  ["dynamodbReadUnits", "DynamoDB read units"],
  ["dynamodbRequests", "DynamoDB requests"],
  ["driveInvocations", "drive invocations"],
  ["workerInvocations", "worker invocations"],
  ["orchestratorMs", "orchestrator ms"],
  ["schedulerInvocations", "Scheduler alarms"],
  ["sqsRequests", "SQS requests"],
  ["s3Puts", "S3 PUTs"],
  ["s3Gets", "S3 GETs"],
  ["s3Bytes", "S3 bytes"],
];

export function formatDollars(value) {
  return value >= 1 ? `$${value.toFixed(2)}` : `$${value.toFixed(6)}`;
}

// The "Cost" row of the run's facts (none before any usage was recorded).
export function costFacts(run) {
  if (!run.cost) return [];
  const parts = Object.entries(run.cost.parts || {})
    .filter(([, value]) => value > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([name, value]) => `${name} ${formatDollars(value)}`);
  const usage = USAGE_LABELS
    .filter(([key]) => run.usage && run.usage[key])
    .map(([key, label]) => h("li", {}, `${Number(run.usage[key]).toLocaleString()} ${label}`));
  return [
    h("dt", {}, "Cost"),
    h("dd", { id: "run-cost" },
      h("strong", {}, formatDollars(run.cost.total)),
      parts.length ? ` (${parts.join(", ")})` : "",
      usage.length ? h("details", { id: "run-usage" }, h("summary", {}, "AWS usage"), h("ul", {}, usage)) : null),
  ];
}
