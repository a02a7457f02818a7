/**
 * host_origin: which Host and Origin headers the admin app answers, so that a web page can neither
 * read it by DNS rebinding nor drive it cross-site. Pure: header text in, a refusal reason or null
 * out. Does not check the token (auth.ts) and does not know the routes (app.ts says which need an
 * Origin check).
 *
 * Host (every request). A rebinding page reaches the app under the page's own DNS name, so the
 * name the request was sent to is what tells it apart: only loopback names (`localhost`,
 * `127.0.0.1`, `[::1]`), the address the app listens on, and names the operator allowed
 * (`--admin-allowed-hosts`, `*` for any) are answered; the port is not part of the rule. A host that
 * is an IP literal cannot be a rebinding (no name was resolved), so on a wildcard listener
 * (`0.0.0.0`, `::`) any IP literal is answered too: its own addresses, which the app cannot list.
 *
 * Origin (what a browser says a script's page is). Same-origin means the Origin's scheme host:port
 * is the one the request was sent to (its Host); `null` (sandboxed frames, files) never is. A
 * request without Origin is not a cross-site browser request (browsers send it on every
 * cross-origin request; `aria split` and curl send none) and passes.
 *
 * Invariants: a reason never echoes more than 80 characters of a header, JSON-quoted (no control
 * characters reach the answer); every check is linear in the header's length, which the HTTP
 * server bounds (16 KiB of request line and headers under Bun).
 */

/** The hosts the app answers as. */
export interface HostPolicy {
  /** `*` was allowed: any well-formed Host. */
  readonly anyHost: boolean;
  /** Lower-case names without a trailing dot; IPv6 in brackets, canonical. */
  readonly names: ReadonlySet<string>;
  /** The listener binds every interface: any IP literal is one of its own addresses. */
  readonly anyAddress: boolean;
}

const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "[::1]"];
/** A DNS name is at most 253 characters; a bracketed IPv6 address with a zone is shorter. */
const HOST_NAME_CHARS_MAX = 253;
const ECHO_CHARS_MAX = 80;

/** The policy of a listener on `listenHost` that also answers `allowedHosts` (names, or `*`). */
export function hostPolicyOf(options: {
  listenHost: string;
  allowedHosts?: readonly string[];
}): HostPolicy {
  const names = new Set(LOOPBACK_NAMES);
  let anyHost = false;
  for (const allowed of options.allowedHosts ?? []) {
    if (allowed === "*") anyHost = true;
    else {
      const host = parseHost(allowed);
      if (host !== null) names.add(host.name);
    }
  }
  const listen = parseHost(bracketed(options.listenHost));
  const anyAddress = listen !== null && (listen.name === "0.0.0.0" || listen.name === "[::]");
  if (listen !== null && !anyAddress) names.add(listen.name);
  return { anyHost, names, anyAddress };
}

/** Why an allowed-hosts entry is not a host name (the CLI's usage error), or null when it is. */
export function allowedHostProblem(entry: string): string | null {
  if (entry === "*") return null;
  const host = parseHost(entry);
  if (host === null) return `${echo(entry)} is not a host name, an IP address or *`;
  if (host.port !== null)
    return `${echo(entry)}: give the name without a port (any port is allowed)`;
  return null;
}

/** Why the app does not answer a request sent to `host` (the Host header), or null when it does. */
export function hostRefusal(host: string | null, policy: HostPolicy): string | null {
  if (host === null) return "the request has no Host header";
  const parsed = parseHost(host);
  if (parsed === null)
    return `the Host header ${echo(host)} is not a host name with an optional port`;
  if (policy.anyHost || policy.names.has(parsed.name)) return null;
  if (policy.anyAddress && isIpLiteral(parsed.name)) return null;
  return `this server does not answer as host ${echo(host)} (a web page reaching it under another name is refused); allow the name with --admin-allowed-hosts`;
}

/**
 * Why `origin` (the Origin header) is not the origin the request was sent to (`host`, already
 * accepted by hostRefusal), or null when it is.
 */
export function originRefusal(origin: string, host: string): string | null {
  const refused = `the Origin ${echo(origin)} is not this server's (${echo(host)}): a page of another site may not call it`;
  const match = /^(https?):\/\/([^/?#]*)$/i.exec(origin);
  if (match === null) return refused;
  const from = parseHost(match[2]);
  const to = parseHost(host);
  if (from === null || to === null || from.name !== to.name) return refused;
  const defaultPort = match[1].toLowerCase() === "https" ? 443 : 80;
  return (from.port ?? defaultPort) === (to.port ?? defaultPort) ? null : refused;
}

/** A Host-header value split into its name (normalized) and port, or null when it is not one. */
function parseHost(text: string): { name: string; port: number | null } | null {
  if (text.length > HOST_NAME_CHARS_MAX + 8) return null;
  // Letters, digits, dots and hyphens, or an IPv6 literal in brackets; no userinfo, no list.
  const match = /^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$/.exec(text);
  if (match === null) return null;
  const port = match[2] === undefined ? null : Number(match[2]);
  if (port !== null && port > 65535) return null;
  let name = match[1].toLowerCase();
  if (name.startsWith("[")) {
    const canonical = canonicalIpv6(name);
    if (canonical === null) return null;
    name = canonical;
  } else {
    if (name.endsWith(".")) name = name.slice(0, -1);
    if (name === "" || name.length > HOST_NAME_CHARS_MAX) return null;
    if (name.split(".").some((label) => label === "" || label.length > 63)) return null;
  }
  return { name, port };
}

/** `[...]` as the URL standard writes it (`[0:0::1]` → `[::1]`), or null when it is no address. */
function canonicalIpv6(bracketedName: string): string | null {
  try {
    return new URL(`http://${bracketedName}/`).hostname;
  } catch {
    return null;
  }
}

/** An IPv4 address in dotted decimal, or a bracketed IPv6 address. */
function isIpLiteral(name: string): boolean {
  if (name.startsWith("[")) return true;
  return /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/.test(name);
}

/** A listen address as a Host names it: an IPv6 address in brackets. */
function bracketed(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

function echo(text: string): string {
  return JSON.stringify(text.length > ECHO_CHARS_MAX ? `${text.slice(0, ECHO_CHARS_MAX)}…` : text);
}
