import { expect, test } from "bun:test";
import { join } from "node:path";

test("the first SIGINT calls the shutdown handler once; a second ends the process at once with 130", async () => {
  const script = `
    import { onShutdownSignal } from ${JSON.stringify(join(import.meta.dir, "process.ts"))};
    onShutdownSignal((signal) => console.log("handler " + signal)); // a clean stop that never ends
    setInterval(() => {}, 1000);
    console.log("ready");
  `;
  const child = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe" });
  const reader = child.stdout.getReader();
  let out = "";
  while (!out.includes("ready")) out += new TextDecoder().decode((await reader.read()).value);
  child.kill("SIGINT");
  while (!out.includes("handler SIGINT"))
    out += new TextDecoder().decode((await reader.read()).value);
  child.kill("SIGINT");
  expect(await child.exited).toBe(130);
  expect(await new Response(child.stderr).text()).toContain("SIGINT again: stopping now");
});
