/**
 * split_host: the SplitHost of `aria split` when `aria serve` owns the data directory — the
 * server's admin app, over HTTP (routes in src/admin/split_routes.ts). The server answers with
 * its layout, reserves file ids from its own counter (so the split's new files never collide with
 * segments its sorter closes meanwhile) and performs the switch itself; it also says what is still
 * open in its journal, and closes it on request (`aria split --seal`).
 */
import type { SplitHost } from "../split/executor.ts";
import type { LayoutSwap, OpenData, PartitionLayout, SealResult } from "../store/mod.ts";

/** A SplitHost that talks to the server at `adminUrl` (over HTTPS trusting `ca`, when given). */
export function remoteHost(adminUrl: string, token?: string, ca?: string): SplitHost {
  const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (token !== undefined) headers.Authorization = `Bearer ${token}`;
    const response = await fetch(`${adminUrl}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      // Bun's fetch takes the CA here (Deno ignores it: its system CAs and DENO_CERT apply).
      ...(ca === undefined ? {} : { tls: { ca } }),
    });
    const reply = (await response
      .json()
      .catch(() => ({ error: `HTTP ${response.status}` }))) as T & { error?: string };
    if (!response.ok)
      throw new Error(
        `the server at ${adminUrl} refused ${path}: ${reply.error ?? response.status}`,
      );
    return reply;
  };
  return {
    layout: async () =>
      (await call<{ layout: PartitionLayout[] }>("GET", "/internal/split/layout")).layout,
    reserveIds: async (count) =>
      (await call<{ first: number }>("POST", "/internal/split/reserve", { count })).first,
    switchLayout: async (swap: LayoutSwap) => {
      await call("POST", "/internal/split/commit", swap);
    },
    openData: async () => (await call<{ open: OpenData }>("GET", "/internal/split/open")).open,
    seal: async () => (await call<{ sealed: SealResult }>("POST", "/internal/split/seal")).sealed,
  };
}
