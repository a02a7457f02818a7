/**
 * nodeIdOf: this node's name when none is given (`aria serve --node-id`): the one kept in
 * `DATA_DIR/node-id`, else a new random one written there, so a replica keeps its name at its
 * leader across restarts. Not here: checking a given id (the CLI does). Invariant: an id read
 * back is one `NODE_ID_PATTERN` accepts; anything else in the file is replaced.
 */
import { randomUUID } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** What a node id may be: 1 to 64 of A-Z a-z 0-9 _ . : - */
export const NODE_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;

/** The node id kept in `dataDir/node-id`, made and written there when missing. */
export async function nodeIdOf(dataDir: string): Promise<string> {
  const path = join(dataDir, "node-id");
  const kept = (await readFile(path, "utf8").catch(() => "")).trim();
  if (NODE_ID_PATTERN.test(kept)) return kept;
  const id = randomUUID().slice(0, 8);
  await writeFile(path, `${id}\n`);
  return id;
}
