/**
 * Builds the npm package of the client for Node.js, packages/client/dist/, from the same sources
 * as everything else (no copy of the client): `bun build --target=node --format=esm` bundles the
 * entry packages/client/src/index.ts (src/client, src/protocol, src/topic and the Node dialer
 * src/runtime/node_dialer.ts) into dist/index.js, and tsc emits the declarations of those files
 * into dist/types/ against Node's types only (packages/client/tsconfig.json), which dist/index.d.ts
 * re-exports. Run with `npm run build:client`; tests/node_client.test.ts runs it, packs the
 * package and installs it into a Node project.
 */
import { $ } from "bun";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const packageDir = join(root, "packages", "client");
const dist = join(packageDir, "dist");

rmSync(dist, { recursive: true, force: true });
await $`${process.execPath} build packages/client/src/index.ts --target=node --format=esm --outfile ${join(dist, "index.js")}`
  .cwd(root)
  .quiet();
await $`${join(root, "node_modules", ".bin", "tsc")} -p ${join(packageDir, "tsconfig.json")}`.cwd(
  root,
);
writeFileSync(join(dist, "index.d.ts"), 'export * from "./types/packages/client/src/index.ts";\n');
console.log(`built ${dist} (index.js, index.d.ts, types/)`);
