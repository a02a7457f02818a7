import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { fcParams } from "../testing/fc_params.ts";
import { rowsArb } from "./split_arbitraries.ts";
import { parseVolumeTable, splitCsvLine, volumeTableOf } from "./volume_table.ts";

function reasonOf(text: string): string {
  const result = parseVolumeTable(text);
  return result.ok ? "ok" : result.reason;
}

describe("parseVolumeTable", () => {
  test("errors name the line and the reason", () => {
    const cases = [
      "",
      "topic,bytes\na,1",
      "topic,bytes,messages\n",
      "topic,bytes,messages\na/b,12x,1",
      "topic,bytes,messages\na/b,-1,1",
      "topic,bytes,messages\na/b,1,1.5",
      "topic,bytes,messages\na/b,99999999999999999,1",
      "topic,bytes,messages\na/b,1",
      "topic,bytes,messages\na/b,1,1,1",
      "topic,bytes,messages\na//b,1,1",
      "topic,bytes,messages\na/*,1,1",
      "topic,bytes,messages\na/b,1,1\nc,2,2\na/b,3,3",
      "topic,bytes,messages\na/b,1,1\n\nc,2,2",
      'topic,bytes,messages\n"a/b,1,1',
      'topic,bytes,messages\n"a/b"x,1,1',
      "topic,bytes,messages\na,9007199254740991,1\nb,1,1",
    ];
    expect(cases.map(reasonOf)).toMatchInlineSnapshot(`
      [
        "line 1: header is "", expected "topic,bytes,messages"",
        "line 1: header is "topic,bytes", expected "topic,bytes,messages"",
        "the table lists no topics",
        "line 2: bytes "12x" is not a whole number",
        "line 2: bytes "-1" is not a whole number",
        "line 2: messages "1.5" is not a whole number",
        "line 2: bytes "99999999999999999" is not a whole number",
        "line 2: 2 fields, expected 3 (topic,bytes,messages)",
        "line 2: 4 fields, expected 3 (topic,bytes,messages)",
        "line 2: invalid topic "a//b": topic has an empty segment at byte 2",
        "line 2: invalid topic "a/*": topic has wildcard character '*' at byte 2",
        "line 4: duplicate topic "a/b" (first on line 2)",
        "line 3: empty line",
        "line 2: unterminated quoted field at column 1",
        "line 2: unexpected character after a quoted field at column 6",
        "line 3: the table's bytes pass the limit of 9007199254740991",
      ]
    `);
  });

  test("CRLF, a BOM, quoted fields and trailing newlines; sorted segment by segment", () => {
    const result = parseVolumeTable(
      '\uFEFFtopic,bytes,messages\r\na/b-x,3,1\r\n"a/b,""q""",2,1\r\na/b/c,1,1\r\na/b,4,2\r\n\r\n\n',
    );
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.table.topics).toEqual(["a/b", "a/b/c", 'a/b,"q"', "a/b-x"]);
    expect(Array.from(result.table.bytes)).toEqual([4, 1, 2, 3]);
    expect(Array.from(result.table.messages)).toEqual([2, 1, 1, 1]);
    expect(result.table.bytesTotal).toBe(10);
  });

  test("every dataset parses", async () => {
    for (const name of ["orders-desk", "services-zipf", "iot-fleet", "even"]) {
      const result = parseVolumeTable(
        await Bun.file(`${import.meta.dir}/../../../shared/datasets/${name}.csv`).text(),
      );
      expect(result.ok ? result.table.topics.length : result.reason).toBeGreaterThan(40);
    }
  });

  test("CSV text of any rows, in any order, parses to the table of the rows", () => {
    const quote = (field: string) =>
      /[",]/.test(field) ? `"${field.replaceAll('"', '""')}"` : field;
    fc.assert(
      fc.property(rowsArb(), fc.boolean(), (rows, crlf) => {
        const lines = [
          "topic,bytes,messages",
          ...rows.map((row) => `${quote(row.topic)},${row.bytes},${row.messages}`),
        ];
        const parsed = parseVolumeTable(lines.join(crlf ? "\r\n" : "\n"));
        const built = volumeTableOf([...rows].reverse());
        expect(parsed).toEqual(built);
        if (!parsed.ok) return;
        const keys = parsed.table.topics.map((topic) => topic.split("/"));
        for (let i = 1; i < keys.length; i++)
          expect(compareSegments(keys[i - 1], keys[i])).toBeLessThan(0);
      }),
      fcParams(),
    );
  });
});

describe("splitCsvLine", () => {
  test("quotes", () => {
    expect(splitCsvLine('a,"b,c","d""e",')).toEqual(["a", "b,c", 'd"e', ""]);
    expect(splitCsvLine('""')).toEqual([""]);
  });
});

function compareSegments(a: string[], b: string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++)
    if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  return a.length - b.length;
}
