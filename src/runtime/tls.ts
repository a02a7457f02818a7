/**
 * tls: what both runtimes' TLS adapters share — checking a server's certificate and key before
 * listening, the one-line form of a client certificate's subject (Connection.peerSubject), and
 * the plain-words reason of a failed handshake. Bun's and Deno's own TLS calls stay in their
 * files (tcp_listener.ts, tcp_dialer.ts, bun_runtime.ts; deno_tcp.ts, deno_runtime.ts).
 *
 * Not here: reading certificate files (the CLI does, src/cli/serve.ts and client_tls.ts) and
 * choosing whether to use TLS (a `tls://` URL, `--tls-cert`).
 *
 * Invariant: a failed verification is an error that names the host and why; nothing here ever
 * turns it into a plain-TCP connection.
 */
import { createPrivateKey, X509Certificate } from "node:crypto";
import type { DialHandlers, DialTls } from "../client/mod.ts";

/** A server's TLS material (PEM text). */
export interface TlsServerOptions {
  cert: string;
  key: string;
  /** CAs whose client certificates the server requires (mutual TLS); absent: none asked. */
  clientCa?: string;
}

/**
 * Why `cert` and `key` cannot serve TLS (unreadable PEM, a key of another certificate, an
 * expired certificate), or null. `nowMs` dates the expiry check.
 */
export function serverTlsProblem(tls: TlsServerOptions, nowMs: number): string | null {
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(tls.cert);
  } catch (error) {
    return `the certificate is not a PEM certificate (${(error as Error).message})`;
  }
  let matches: boolean;
  try {
    matches = certificate.checkPrivateKey(createPrivateKey(tls.key));
  } catch (error) {
    return `the key is not a PEM private key (${(error as Error).message})`;
  }
  if (!matches)
    return `the key does not belong to the certificate (subject ${certificate.subject})`;
  if (certificate.validToDate.getTime() < nowMs)
    return `the certificate expired on ${certificate.validToDate.toISOString()}`;
  if (tls.clientCa !== undefined) {
    try {
      new X509Certificate(tls.clientCa);
    } catch (error) {
      return `the client CA is not a PEM certificate (${(error as Error).message})`;
    }
  }
  return null;
}

/** A certificate's subject as node:tls gives it: attribute → value (or values, repeated). */
export type SubjectFields = Record<string, string | string[] | undefined>;

/**
 * The one-line subject Connection.peerSubject carries: `KEY=value` pairs in the certificate's
 * order, joined by ",", with `,` `+` `=` `\` `"` `<` `>` `;` in a value escaped by a backslash
 * (RFC 4514's escapes, the certificate's order): "CN=alice,O=Example".
 */
export function subjectText(subject: SubjectFields): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(subject)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value])
      parts.push(`${key}=${one.replace(/[,+="\\<>;]/g, (c) => `\\${c}`)}`);
  }
  return parts.join(",");
}

/** What a handshake failure code means, in words (OpenSSL's and node's codes). */
const HANDSHAKE_REASONS: Record<string, (host: string) => string> = {
  CERT_HAS_EXPIRED: () => "the server's certificate has expired",
  CERT_NOT_YET_VALID: () => "the server's certificate is not valid yet",
  ERR_TLS_CERT_ALTNAME_INVALID: (host) => `the server's certificate is not for "${host}"`,
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: () =>
    "the server's certificate is not signed by a CA this client trusts",
  UNABLE_TO_GET_ISSUER_CERT: () =>
    "the server's certificate is not signed by a CA this client trusts",
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: () =>
    "the server's certificate is not signed by a CA this client trusts",
  DEPTH_ZERO_SELF_SIGNED_CERT: () =>
    "the server's certificate is self-signed and not trusted by this client",
  SELF_SIGNED_CERT_IN_CHAIN: () =>
    "the server's certificate chains to a CA this client does not trust",
};

/** The error of a failed TLS handshake with host:port: what failed, in words, and the code. */
export function handshakeError(host: string, port: number, cause: unknown): Error {
  const code = (cause as { code?: unknown } | null)?.code;
  const message = cause instanceof Error ? cause.message : String(cause ?? "closed");
  const reason =
    typeof code === "string" && HANDSHAKE_REASONS[code] !== undefined
      ? `${HANDSHAKE_REASONS[code](host)} (${code})`
      : /WRONG_VERSION_NUMBER|wrong version number|InvalidContentType|CorruptMessage/i.test(message)
        ? `the server does not speak TLS on this port (${message}); a plain server takes tcp://`
        : `${message}${typeof code === "string" ? ` (${code})` : ""}`;
  return new Error(`TLS handshake with ${host}:${port} failed: ${reason}`);
}

/** The error of a TLS connection the server ended with an alert, in words where one is known. */
export function tlsAlertError(cause: Error): Error {
  if (/CERTIFICATE_REQUIRED|certificate required/i.test(cause.message))
    return new Error(`the server requires a client certificate (${cause.message})`);
  if (/UNKNOWN_CA|BAD_CERTIFICATE|unknown ca|bad certificate/i.test(cause.message))
    return new Error(`the server refused the client certificate (${cause.message})`);
  return cause;
}

/** Reports the close of an open connection once, a TLS alert in words where one is known. */
export function reportClose(
  handlers: DialHandlers,
  tls: DialTls | undefined,
  answered: boolean,
  failure: Error | undefined,
): void {
  if (tls === undefined) handlers.close(failure);
  else if (failure !== undefined) handlers.close(tlsAlertError(failure));
  // A server that does not trust the client's certificate may close without an alert (TLS 1.3:
  // after the client's side of the handshake completed), so say what it most likely means.
  else if (!answered && tls.cert !== undefined)
    handlers.close(
      new Error(
        "the server closed the connection before answering: it did not accept the client certificate",
      ),
    );
  else handlers.close();
}
