// A readable JSON view: objects and arrays fold, large ones start folded.

import { h } from "./dom.js";

const FOLD_ITEMS = 8;
const FOLD_STRING = 300;

function scalar(value) {
  if (value === null) return h("span", { class: "lit" }, "null");
  if (typeof value === "string") {
    const text = JSON.stringify(value);
    if (text.length > FOLD_STRING) {
      return h("details", {}, h("summary", { class: "str" }, `${text.slice(0, 80)}… (${value.length} characters)`),
        h("span", { class: "str" }, text));
    }
    return h("span", { class: "str" }, text);
  }
  if (typeof value === "number") return h("span", { class: "num" }, String(value));
  return h("span", { class: "lit" }, String(value));
}

function node(key, value, depth) {
  const label = key === null ? [] : [h("span", { class: "k" }, JSON.stringify(key)), ": "];
  if (value === null || typeof value !== "object") {
    return h("div", { class: "line" }, label, scalar(value));
  }
  const isArray = Array.isArray(value);
  const entries = isArray ? value.map((v, i) => [null, v, i]) : Object.entries(value).map(([k, v]) => [k, v]);
  const [open, close] = isArray ? ["[", "]"] : ["{", "}"];
  if (entries.length === 0) return h("div", { class: "line" }, label, open + close);
  const n = entries.length;
  const size = isArray ? `${n} item${n === 1 ? "" : "s"}` : `${n} key${n === 1 ? "" : "s"}`;
  const box = h("details", { open: depth < 2 && entries.length <= FOLD_ITEMS },
    h("summary", {}, label, `${open} … ${close} `, h("span", { class: "muted" }, size)));
  for (const [k, v] of entries) box.append(node(k, v, depth + 1));
  return box;
}

export function jsonView(value) {
  if (value === undefined) return h("p", { class: "muted" }, "none");
  return h("div", { class: "json" }, node(null, value, 0));
}
