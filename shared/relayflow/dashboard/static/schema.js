// Checks a value against the JSON Schema keywords manifests use for workflow inputs
// (type, required, properties, additionalProperties, items, enum, const, bounds, pattern).
// Unknown keywords are ignored: the server stays the judge; this only catches mistakes early.

function typeOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function matchesType(value, type) {
  const actual = typeOf(value);
  return actual === type || (type === "number" && actual === "integer");
}

export function checkSchema(value, schema, path = "input") {
  const problems = [];
  if (!schema || typeof schema !== "object") return problems;
  if (schema.type) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((t) => matchesType(value, t))) {
      problems.push(`${path} should be ${types.join(" or ")}, not ${typeOf(value)}`);
      return problems;
    }
  }
  if (schema.enum && !schema.enum.some((item) => JSON.stringify(item) === JSON.stringify(value))) {
    problems.push(`${path} should be one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`);
  }
  if ("const" in schema && JSON.stringify(schema.const) !== JSON.stringify(value)) {
    problems.push(`${path} should be ${JSON.stringify(schema.const)}`);
  }
  if (typeof value === "string") {
    if (schema.minLength !== undefined && value.length < schema.minLength) problems.push(`${path} should have at least ${schema.minLength} characters`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) problems.push(`${path} should have at most ${schema.maxLength} characters`);
    if (schema.pattern) {
      try { if (!new RegExp(schema.pattern, "u").test(value)) problems.push(`${path} should match ${schema.pattern}`); } catch { /* the server judges patterns JS cannot read */ }
    }
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) problems.push(`${path} should be ≥ ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) problems.push(`${path} should be ≤ ${schema.maximum}`);
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) problems.push(`${path} should be > ${schema.exclusiveMinimum}`);
    if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) problems.push(`${path} should be < ${schema.exclusiveMaximum}`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) problems.push(`${path} should have at least ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) problems.push(`${path} should have at most ${schema.maxItems} items`);
    if (schema.items && typeof schema.items === "object") {
      value.forEach((item, i) => problems.push(...checkSchema(item, schema.items, `${path}[${i}]`)));
    }
  }
  if (typeOf(value) === "object") {
    for (const name of schema.required || []) {
      if (!(name in value)) problems.push(`${path}.${name} is required`);
    }
    const props = schema.properties || {};
    for (const [name, item] of Object.entries(value)) {
      if (name in props) problems.push(...checkSchema(item, props[name], `${path}.${name}`));
      else if (schema.additionalProperties === false) problems.push(`${path}.${name} is not allowed`);
      else if (schema.additionalProperties && typeof schema.additionalProperties === "object") {
        problems.push(...checkSchema(item, schema.additionalProperties, `${path}.${name}`));
      }
    }
  }
  return problems;
}
