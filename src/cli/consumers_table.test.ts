/** `aria consumers ls`: the OWNER column (the user who created a consumer; "-" for none). */
import { expect, test } from "bun:test";
import { consumersTable } from "./consumers.ts";

test("consumers ls prints each consumer's owner", () => {
  const row = {
    filter: ["a/**"],
    shared: false,
    ackedSeq: 1,
    nextSeq: 2,
    pendingSeqs: 0,
    members: 0,
    lastActiveUs: 0,
  };
  const lines = consumersTable([
    { ...row, name: "c", owner: "alice" },
    { ...row, name: "d", owner: null },
  ]).split("\n");
  expect(lines[0]).toMatch(/LAST ACTIVE\s+OWNER$/);
  expect(lines[1]).toMatch(/^c\s.*\salice$/);
  expect(lines[2]).toMatch(/^d\s.*\s-$/);
});
