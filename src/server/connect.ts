/**
 * connect: the client bound to this process's runtime — AriaClient.connect with the runtime's
 * TCP dialer (Bun.connect or Deno.connect). The client itself (src/client/) is pure and takes any
 * Dialer; this is the one place that picks the real one, for the CLI, the bench environment, the
 * public library API (mod.ts) and the end-to-end tests.
 */
import { AriaClient, type ClientOptions } from "../client/mod.ts";
import { runtime } from "../runtime/mod.ts";

/** Connects to an Aria server at `url` (tcp://HOST:PORT) and completes the handshake. */
export function connect(url: string, options: ClientOptions = {}): Promise<AriaClient> {
  return AriaClient.connect(url, runtime.dialTcp, options);
}
