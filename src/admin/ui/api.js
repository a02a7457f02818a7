// Calls to the admin API: JSON in and out, the admin token (if the server wants one) sent as a
// bearer header on every call. The token comes from `#token=...` in the page address or from the
// token bar, and lives in sessionStorage only (gone when the tab closes).

const TOKEN_KEY = "aria-admin-token";
let token = sessionStorage.getItem(TOKEN_KEY);
const unauthorizedListeners = [];

/** An API answer other than 2xx, with the server's reason. */
export class ApiError extends Error {
  constructor(status, reason) {
    super(reason);
    this.status = status;
  }
}

/** Takes a token from `#token=...` in the address (and removes it from the address bar). */
export function takeTokenFromAddress() {
  const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (match === null) return;
  // A malformed escape (a bare %) is taken as it is, not a failure that stops the app.
  let token = match[1];
  try {
    token = decodeURIComponent(token);
  } catch {}
  setToken(token);
  history.replaceState(null, "", `${location.pathname}${location.search}`);
}

/** Uses `value` as the admin token from now on. */
export function setToken(value) {
  token = value === "" ? null : value;
  if (token === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

/** Calls `listener` whenever the server answers 401. */
export function onUnauthorized(listener) {
  unauthorizedListeners.push(listener);
}

/** Fetches `path` (relative to the page) and returns the parsed JSON; throws ApiError on failure. */
export async function api(path, options = {}) {
  const headers = new Headers(options.headers ?? {});
  if (token !== null) headers.set("Authorization", `Bearer ${token}`);
  let response;
  try {
    response = await fetch(path, { ...options, headers });
  } catch (error) {
    throw new ApiError(0, `the server did not answer (${error.message})`);
  }
  if (response.status === 401) for (const listener of unauthorizedListeners) listener();
  const body = await response.json().catch(() => null);
  if (!response.ok)
    throw new ApiError(response.status, body?.error ?? `${response.status} ${response.statusText}`);
  return body;
}
