/**
 * Block pool against a model: random acquires of every size class and releases in any order.
 * Held blocks never overlap (each writes a tag over all its entries and finds it intact when it
 * goes back), acquire fails exactly when every unit of every page is held, pages return once
 * empty, and an emptied pool hands every page out again as a whole 1,024-entry block.
 */
import { expect, test } from "bun:test";
import fc from "fast-check";
import { INDEX_BLOCK_ENTRIES } from "../constants.ts";
import { fcParams } from "../testing/fc_params.ts";
import {
  BLOCK_NONE,
  BLOCK_UNIT_ENTRIES,
  BlockPool,
  CLASS_ENTRIES,
  classForLive,
  ENTRY_WORDS,
} from "./block_pool.ts";

const UNITS_PER_PAGE = INDEX_BLOCK_ENTRIES / BLOCK_UNIT_ENTRIES;

function tagWords(pool: BlockPool, block: number): Uint32Array {
  const start = block * BLOCK_UNIT_ENTRIES * ENTRY_WORDS;
  return pool.entries.subarray(start, start + pool.capacityOf(block) * ENTRY_WORDS);
}

const operationArb = fc.oneof(
  fc.record({ acquire: fc.nat(CLASS_ENTRIES.length - 1) }),
  fc.record({ release: fc.nat() }),
);

test("property: blocks of every class never overlap; acquire fails only when all is held", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 2, max: 5 }),
      fc.array(operationArb, { maxLength: 600 }),
      (pages, ops) => {
        const pool = new BlockPool(pages);
        const held: { block: number; tag: number }[] = [];
        let unitsHeld = 0;
        let tag = 1;
        const pagesOf = () => new Set(held.map((h) => Math.floor(h.block / UNITS_PER_PAGE))).size;
        const release = (index: number) => {
          const { block, tag: mine } = held[index];
          expect(tagWords(pool, block).every((word) => word === mine)).toBe(true);
          unitsHeld -= pool.capacityOf(block) / BLOCK_UNIT_ENTRIES;
          pool.release(block);
          held.splice(index, 1);
        };
        for (const op of ops) {
          if ("acquire" in op) {
            const full = unitsHeld === pages * UNITS_PER_PAGE;
            expect(pool.canAcquire()).toBe(!full);
            const block = pool.acquire(op.acquire);
            expect(block === BLOCK_NONE).toBe(full);
            if (block === BLOCK_NONE) continue;
            expect(pool.count[block]).toBe(0);
            expect(pool.next[block]).toBe(BLOCK_NONE);
            tagWords(pool, block).fill(tag);
            held.push({ block, tag: tag++ });
            unitsHeld += pool.capacityOf(block) / BLOCK_UNIT_ENTRIES;
          } else if (held.length > 0) {
            release(op.release % held.length);
          }
          expect(pool.blocksUsed).toBe(held.length);
          expect(pool.pagesUsed).toBe(pagesOf());
          expect(pool.pagesUsed + pool.pagesFree).toBe(pages);
        }
        while (held.length > 0) release(held.length - 1);
        expect({ pages: pool.pagesUsed, blocks: pool.blocksUsed }).toEqual({ pages: 0, blocks: 0 });
        // Every page comes back whole, whatever class it was cut into.
        const whole = CLASS_ENTRIES.length - 1;
        const blocks = Array.from({ length: pages }, () => pool.acquire(whole));
        expect(
          blocks.every((block) => block !== BLOCK_NONE && pool.capacityOf(block) === 1024),
        ).toBe(true);
        expect(pool.acquire(0)).toBe(BLOCK_NONE);
      },
    ),
    fcParams({ runs: 200 }),
  );
});

test("a partition's class follows its live entries: 16 when cold, 1,024 when busy", () => {
  expect([0, 1, 255, 256, 1023, 1024, 4095, 4096, 1e6].map(classForLive)).toEqual([
    0, 0, 0, 1, 1, 2, 2, 3, 3,
  ]);
});
