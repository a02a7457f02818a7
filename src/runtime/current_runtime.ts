/**
 * current_runtime: the Runtime of this process, chosen once at start-up by detecting Deno's global
 * (Bun has none). Both implementations are imported, but only the chosen one is built: every
 * `Bun.` / `Deno.` reference sits inside `bunRuntime()` / `denoRuntime()` or the functions they
 * hand out, and their modules' own imports (node:fs, node:zlib, type-only "bun") load under both.
 *
 * Not a top-level `await import()`: a module worker (src/server/split_worker.ts) sets its message
 * handler after its imports, and with an await in between Bun delivered the first task to no
 * handler (the split hung).
 */
import { bunRuntime } from "./bun_runtime.ts";
import { denoRuntime } from "./deno_runtime.ts";
import type { Runtime } from "./runtime.ts";

/** The runtime running Aria now: Deno when `Deno` exists, Bun otherwise. */
export const runtime: Runtime = typeof Deno !== "undefined" ? denoRuntime() : bunRuntime();
