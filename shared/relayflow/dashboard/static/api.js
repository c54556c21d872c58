// Calls the relayflow API of this origin with the bearer token kept in sessionStorage.

const TOKEN_KEY = "relayflow.token";

export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message || code);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

// A "#token=..." fragment signs in: the token moves to sessionStorage and leaves the address.
export function takeTokenFromFragment() {
  const fragment = location.hash.replace(/^#/, "");
  if (!fragment.startsWith("token=")) return false;
  const params = new URLSearchParams(fragment);
  const token = params.get("token");
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  history.replaceState(null, "", location.pathname + location.search + "#/runs");
  return Boolean(token);
}

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

export function runPath(runId) {
  return "api/runs/" + encodeURIComponent(runId);
}

export async function api(path, { method = "GET", body, query, signal, headers: extra } = {}) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    if (value === undefined || value === null || value === "") continue;
    for (const item of Array.isArray(value) ? value : [value]) params.append(key, String(item));
  }
  const url = path + (params.size ? "?" + params.toString() : "");
  const headers = { Accept: "application/json", ...(extra || {}) };
  const secret = token.get();
  if (secret) headers.Authorization = `Bearer ${secret}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method, headers, signal, cache: "no-store", credentials: "omit",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "unreachable", "The API did not answer. Is the stack still running?");
  }
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) {
    const code = (data && data.error) || `http_${response.status}`;
    const message = (data && data.message) || text.slice(0, 300) || response.statusText;
    throw new ApiError(response.status, code, message, data);
  }
  return data;
}
