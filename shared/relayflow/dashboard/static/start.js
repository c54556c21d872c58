// Start a run: the environment's workflows from its manifest, a JSON input checked for syntax
// and against the workflow's input schema, an idempotency key; the new run opens.

import { api, ApiError } from "./api.js";
import { h, replace } from "./dom.js";
import { checkSchema } from "./schema.js";

const ENVIRONMENTS = ["development", "preview", "production"];

export function renderStart(main, params, ctx) {
  const controller = new AbortController();
  const environment = ENVIRONMENTS.includes(params.get("env")) ? params.get("env") : "development";
  document.title = "Start a run · relayflow";
  replace(main, h("h1", {}, "Start a run"), h("p", { class: "muted" }, "Loading the workflows…"));

  api("api/manifests/" + environment, { signal: controller.signal })
    .then((found) => show(found.manifest.workflows || [], found.versionId))
    .catch((error) => {
      if (error.name === "AbortError") return;
      if (error instanceof ApiError && error.status === 404) { show([], null); return; }
      replace(main, h("h1", {}, "Start a run"), ctx.errorState(error, () => ctx.navigate(location.hash)));
    });

  function show(workflows, versionId) {
    const envSelect = h("select", { id: "start-env", onchange: () => ctx.navigate(`#/start?env=${envSelect.value}`) },
      ENVIRONMENTS.map((e) => h("option", { value: e, selected: e === environment }, e)));
    if (!workflows.length) {
      replace(main, h("h1", {}, "Start a run"),
        h("label", { for: "start-env" }, "Environment", envSelect),
        h("div", { class: "notice", id: "start-empty" },
          h("p", {}, h("strong", {}, `No workflows are registered for ${environment}.`)),
          h("p", {}, "Register a manifest with ", h("code", {}, `relayflow manifest push --env ${environment}`),
            " (", h("code", {}, "relayflow dev"), " registers its app's workflows for development).")));
      return;
    }
    const wanted = params.get("workflow");
    const workflowSelect = h("select", { id: "start-workflow", name: "workflow" },
      workflows.map((w) => h("option", { value: w.id, selected: w.id === wanted }, w.id)));
    const input = h("textarea", { id: "start-input", spellcheck: "false", "aria-describedby": "input-check" }, "{}");
    const check = h("p", { id: "input-check", "aria-live": "polite" });
    const key = h("input", { id: "start-key", name: "idempotencyKey", size: 30, placeholder: "optional" });
    const tags = h("input", { id: "start-tags", name: "tags", size: 30, placeholder: "comma separated, optional" });
    const schemaBox = h("div", {});
    const problem = h("p", { class: "field-error", role: "alert", id: "start-error" });
    const submit = h("button", { type: "submit", class: "primary", id: "start-submit" }, "Start run");

    const current = () => workflows.find((w) => w.id === workflowSelect.value) || {};
    function validate() {
      const text = input.value.trim();
      let value = null;
      if (text) {
        try { value = JSON.parse(text); } catch (error) {
          check.className = "field-error";
          check.textContent = `Not valid JSON: ${error.message}`;
          return { ok: false };
        }
      }
      const problems = checkSchema(value, current().inputSchema);
      if (problems.length) {
        check.className = "field-error";
        check.textContent = "Does not match the input schema:\n" + problems.slice(0, 8).join("\n");
        return { ok: false };
      }
      check.className = "ok-text";
      check.textContent = current().inputSchema ? "Valid JSON; matches the input schema." : "Valid JSON (this workflow declares no input schema).";
      return { ok: true, value };
    }
    function showWorkflow() {
      const workflow = current();
      replace(schemaBox,
        workflow.description ? h("p", {}, workflow.description) : null,
        workflow.inputSchema
          ? h("details", {}, h("summary", {}, "Input schema"), h("pre", { class: "json" }, JSON.stringify(workflow.inputSchema, null, 2)))
          : h("p", { class: "muted" }, "This workflow declares no input schema: any JSON is sent as it is."));
      validate();
    }
    workflowSelect.addEventListener("change", showWorkflow);
    input.addEventListener("input", validate);
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); form.requestSubmit(); }
    });

    const form = h("form", { class: "panel", onsubmit: async (event) => {
      event.preventDefault();
      problem.textContent = "";
      const checked = validate();
      if (!checked.ok) { input.focus(); return; }
      const body = { workflowId: workflowSelect.value, input: checked.value, environment };
      if (key.value.trim()) body.idempotencyKey = key.value.trim();
      const tagList = tags.value.split(",").map((t) => t.trim()).filter(Boolean);
      if (tagList.length) body.tags = tagList;
      submit.disabled = true;
      try {
        const run = await api("api/runs", { method: "POST", body });
        ctx.navigate("#/runs/" + encodeURIComponent(run.id));
      } catch (error) {
        problem.textContent = `${error.message}${error.code ? ` (${error.code})` : ""}`;
        submit.disabled = false;
      }
    } },
    h("div", { class: "row" }, h("label", { for: "start-env" }, "Environment", envSelect),
      h("label", { for: "start-workflow" }, "Workflow", workflowSelect)),
    schemaBox,
    h("label", { for: "start-input" }, "Input (JSON) — Ctrl+Enter starts", input), check,
    h("div", { class: "row" }, h("label", { for: "start-key" }, "Idempotency key", key),
      h("label", { for: "start-tags" }, "Tags", tags)),
    h("p", { class: "muted" }, "A repeated idempotency key opens the run it first started instead of starting another."),
    problem, h("p", {}, submit));
    replace(main, h("h1", {}, "Start a run"), versionId ? h("p", { class: "muted" }, `Manifest ${versionId}`) : null, form);
    showWorkflow();
  }
  return () => controller.abort();
}
