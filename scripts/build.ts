/**
 * Builds the one self-contained binary dist/aria with `bun build --compile`. Worker entry points
 * are passed as extra entries so `new Worker(new URL("./x.ts", import.meta.url))` resolves inside
 * the binary. The commit it is built from (with "-dirty" when the tree has uncommitted changes)
 * becomes the constant ARIA_BUILD_COMMIT that `aria --version` prints (src/runtime/build_info.ts).
 * Run with `npm run build`; `npm ci` runs it too (the `prepare` script), so `npx aria` works at once.
 */
import { $ } from "bun";
import { existsSync } from "node:fs";

/** Worker entry points compiled into the binary beside main.ts. */
export const WORKER_ENTRIES: string[] = ["src/server/split_worker.ts"].filter((path) =>
  existsSync(path),
);

const root = new URL("..", import.meta.url).pathname;

/** The commit of the checkout at `root`, 12 hex digits, "-dirty" when it has uncommitted changes; "unknown" outside git. */
async function checkoutCommit(): Promise<string> {
  const head = await $`git rev-parse --short=12 HEAD`.cwd(root).quiet().nothrow();
  if (head.exitCode !== 0) return "unknown";
  const status = await $`git status --porcelain --untracked-files=no`.cwd(root).quiet().nothrow();
  return `${head.stdout.toString().trim()}${status.stdout.toString().trim() === "" ? "" : "-dirty"}`;
}

const define = `ARIA_BUILD_COMMIT=${JSON.stringify(await checkoutCommit())}`;
await $`bun build --compile --minify-syntax --sourcemap=inline --define ${define} main.ts ${WORKER_ENTRIES} --outfile dist/aria`.cwd(
  root,
);
console.log(
  `built ${root}dist/aria (workers: ${WORKER_ENTRIES.length === 0 ? "none" : WORKER_ENTRIES.join(", ")})`,
);
