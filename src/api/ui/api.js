// The HTTP client of the page: JSON in and out, problem+json errors as ApiError, and the
// bearer token. The token lives in sessionStorage (this tab only), travels only in the
// Authorization header, and is never put in a URL or logged.

const TOKEN_KEY = "mercer.token";

export function getToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// An error answer: `problem` is the server's problem object {type, title, status, detail,
// errors: [{pointer, message}]}, or one made up here when the body was not one.
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.title || `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.problem = problem;
  }
}

// api("GET", "/models"); api("POST", "/models", {json: {...}}); api("POST", path, {body, type}).
export async function api(method, path, { json, body, type } = {}) {
  const headers = { Accept: "application/json, application/problem+json" };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (json !== undefined) {
    body = JSON.stringify(json);
    type = "application/json";
  }
  if (type) headers["Content-Type"] = type;

  let res;
  try {
    res = await fetch(path, { method, headers, body, cache: "no-store", credentials: "omit" });
  } catch {
    throw new ApiError(0, { title: "Network error", detail: "The server could not be reached." });
  }
  if (res.status === 204) return null;
  const contentType = res.headers.get("Content-Type") || "";
  const data = contentType.includes("json")
    ? await res.json().catch(() => null)
    : await res.text().catch(() => "");
  if (!res.ok) {
    const problem =
      data && typeof data === "object"
        ? data
        : { title: res.statusText || "Error", status: res.status, detail: String(data || "").slice(0, 500) };
    throw new ApiError(res.status, problem);
  }
  return data;
}
