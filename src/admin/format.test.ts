/**
 * The web UI and the command line print a byte size the same way: the UI's formatBytes
 * (ui/format.js, plain JavaScript served to the browser) against the CLI's (src/stdx/format_bytes.ts).
 */
import { expect, test } from "bun:test";
import { formatBytes } from "../stdx/format_bytes.ts";

test("the web UI formats bytes exactly as the command line does (binary units)", async () => {
  const ui = (await import(new URL("./ui/format.js", import.meta.url).href)) as {
    formatBytes(bytes: number | null): string;
  };
  const samples = [
    0,
    1,
    999,
    1000,
    1023,
    1024,
    1536,
    10_239,
    102_400,
    1_048_575,
    1_048_576,
    3.35e9,
    8.11e9,
    2 ** 40 * 3,
    2 ** 50,
  ];
  for (let i = 0; i < 2000; i++) samples.push(Math.floor(2 ** (((i * 0.6180339887) % 1) * 50))); // spread over 1 B..1 PiB, the same every run
  for (const bytes of samples)
    expect({ bytes, ui: ui.formatBytes(bytes) }).toEqual({ bytes, ui: formatBytes(bytes) });
  expect(ui.formatBytes(3_350_000_000)).toBe("3.1 GiB");
  expect(ui.formatBytes(null)).toBe("—");
});
