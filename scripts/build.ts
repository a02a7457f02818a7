/**
 * Builds the one self-contained binary dist/aria with `bun build --compile`. Worker entry points
 * are passed as extra entries so `new Worker(new URL("./x.ts", import.meta.url))` resolves inside
 * the binary. Run with `npm run build`.
 */
import { $ } from "bun";
import { existsSync } from "node:fs";

/** Worker entry points compiled into the binary beside main.ts. */
export const WORKER_ENTRIES: string[] = ["src/split/split_worker.ts"].filter((path) => existsSync(path));

const root = new URL("..", import.meta.url).pathname;
await $`bun build --compile --minify-syntax --sourcemap=inline main.ts ${WORKER_ENTRIES} --outfile dist/aria`.cwd(root);
console.log(`built ${root}dist/aria (workers: ${WORKER_ENTRIES.length === 0 ? "none" : WORKER_ENTRIES.join(", ")})`);
