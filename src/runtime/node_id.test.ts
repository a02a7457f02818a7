/** nodeIdOf: made once, kept in DATA_DIR/node-id, read back the same; a bad file is replaced. */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NODE_ID_PATTERN, nodeIdOf } from "./node_id.ts";

test("a node id is made once and kept in the data directory", async () => {
  const dir = mkdtempSync(join(tmpdir(), "aria-node-id-"));
  try {
    const id = await nodeIdOf(dir);
    expect(NODE_ID_PATTERN.test(id)).toBe(true);
    expect(readFileSync(join(dir, "node-id"), "utf8")).toBe(`${id}\n`);
    expect(await nodeIdOf(dir)).toBe(id);
    writeFileSync(join(dir, "node-id"), "not a valid id!\n");
    const replaced = await nodeIdOf(dir);
    expect(replaced).not.toBe("not a valid id!");
    expect(NODE_ID_PATTERN.test(replaced)).toBe(true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
