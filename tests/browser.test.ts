/**
 * The web UI in a real browser: headless Debian chromium (playwright-core) against the compiled
 * binary, `dist/aria serve` on port 0. The overview shows live numbers after messages are
 * published with the client library; the topic browser lists them; the split view, given
 * orders-desk.csv from the shared datasets, draws both plans with the figures the planner computes,
 * highlights the worst topics and explains a cell on hover. The page must load nothing but its
 * own origin and log no errors. The split view's screenshot goes to a temporary directory (tests
 * never write the tracked tree; `npm run docs:screenshot` refreshes docs/split-view.png).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { formatBytes } from "../src/stdx/format_bytes.ts";
import { connect } from "../src/server/mod.ts";
import { parseVolumeTable, planSplit } from "../src/split/mod.ts";
import { launchChromium } from "./fixtures/browser_chromium.ts";
import { type AriaServer, cleanupAll, makeTempDir, startAria } from "./fixtures/e2e_server.ts";
import { ORDERS_DESK_CSV as DATASET, showUploadedSplit } from "./fixtures/split_view.ts";

let server: AriaServer;
let browser: Browser;
let page: Page;
const offOrigin: string[] = [];
const pageErrors: string[] = [];

beforeAll(async () => {
  [server, browser] = await Promise.all([startAria({ tipBytes: "64MiB" }), launchChromium()]);
  page = await browser.newPage({ viewport: { width: 1480, height: 900 }, deviceScaleFactor: 1 });
  page.on("request", (request) => {
    if (!request.url().startsWith(`${server.adminUrl}/`) && !request.url().startsWith("data:"))
      offOrigin.push(request.url());
  });
  page.on("pageerror", (error) => pageErrors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") pageErrors.push(message.text());
  });
}, 30_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await cleanupAll();
});

/** The text of `[data-field=name]` on the overview. */
function field(name: string): Promise<string> {
  return page.locator(`#view-overview [data-field="${name}"]`).first().innerText();
}

test("the overview follows the server live", async () => {
  await page.goto(`${server.adminUrl}/`);
  await page.waitForFunction(
    () => document.querySelector('[data-field="published-messages"]')?.textContent === "0",
  );
  expect(await field("tip-oldest")).toBe("— (empty)");

  const client = await connect(server.tcpUrl);
  const subscription = client.subscribe("desk/**", { from: "earliest" });
  const topics = [
    "desk/fx/orders/new",
    "desk/fx/orders/fill",
    "desk/rates/usd/c01",
    "desk/rates/eur/c02",
    "ops/audit",
  ];
  const payload = "x".repeat(100);
  for (let round = 0; round < 60; round++)
    await Promise.all(topics.map((topic) => client.publish(topic, payload)));
  const published = 60 * topics.length;

  await page.waitForFunction(
    (count) =>
      document.querySelector('[data-field="published-messages"]')?.textContent ===
      count.toLocaleString("en-US"),
    published,
    { timeout: 10_000 },
  );
  await page.waitForFunction(
    () =>
      Number(
        document.querySelector('[data-field="rate-messages"]')?.textContent?.replace(/,/g, ""),
      ) > 0,
    undefined,
    { timeout: 10_000 },
  );
  expect(await field("published-bytes")).toBe(formatBytes(30_000));
  expect(await field("tip-records")).toBe(String(published));
  expect(await field("tip-oldest")).toBe("1");
  expect(await field("next-seq")).toBe(String(published + 1));
  expect(await field("connections")).toBe("1");
  expect(await field("subscriptions")).toBe("1");
  expect(await page.locator('#subs-legend [data-state="live"] b').innerText()).toBe("1");
  const tipBytes = (await server.stats()).tip as unknown as { bytesUsed: number };
  expect(tipBytes.bytesUsed).toBeGreaterThan(10_000);
  expect(tipBytes.bytesUsed).toBeLessThan(100_000);
  expect(await field("tip-used")).toBe(formatBytes(tipBytes.bytesUsed));
  expect(await field("tip-fill")).toBe("<0.1%");
  expect(await page.locator("#conn").getAttribute("class")).toContain("ok");

  subscription.close();
  await client.close();
  await page.waitForFunction(
    () => document.querySelector('[data-field="connections"]')?.textContent === "0",
    undefined,
    { timeout: 10_000 },
  );
}, 30_000);

test("the topic browser lists the published tree with volumes", async () => {
  await page.goto(`${server.adminUrl}/#topics`);
  const desk = page.locator('#topics-body tr[data-path="desk"]');
  await desk.waitFor();
  expect(await desk.locator("td").nth(2).innerText()).toBe("240");
  await desk.click();
  await page.locator('#topics-body tr[data-path="desk/fx"]').waitFor();
  expect(await page.locator('#topics-body tr[data-path="desk/rates"] td').nth(3).innerText()).toBe(
    formatBytes(12_000),
  );
});

test("the split view draws both plans of an uploaded volume table", async () => {
  const table = parseVolumeTable(readFileSync(DATASET, "utf8"));
  if (!table.ok) throw new Error(table.reason);
  const expected = {
    heuristic: planSplit(table.table, { algorithm: "heuristic" }).metrics,
    adaptive: planSplit(table.table, { algorithm: "adaptive" }).metrics,
  };

  await showUploadedSplit(page, server.adminUrl, DATASET);
  await Bun.sleep(300); // a late answer for the live volumes would land here
  expect(await page.locator("#split-summary").innerText()).toBe(
    `orders-desk.csv: 49 topics in 2 partitions, ${formatBytes(table.table.bytesTotal)}.`,
  );
  for (const algorithm of ["heuristic", "adaptive"] as const) {
    const panel = page.locator(`[data-plan="${algorithm}"]`);
    const metric = (name: string, part: "value" | "topic") =>
      panel.locator(`[data-metric="${name}"] .${part}`).innerText();
    expect(await metric("stores", "value")).toBe(String(expected[algorithm].stores));
    expect(await metric("worst-waste", "topic")).toBe(expected[algorithm].worstWaste.topic);
    expect(await metric("worst-ratio", "topic")).toBe(expected[algorithm].worstRatio.topic);
    for (const name of ["wasted", "worst-waste", "worst-ratio", "subtree-wasted"])
      expect(await metric(name, "value")).toMatch(/^[\d.]+ ?(B|KiB|MiB|GiB|TiB|×)$/);
    // Every topic has a cell (log scale keeps the smallest visible), plus its prefixes.
    expect(await panel.locator("svg.icicle rect.cell").count()).toBeGreaterThan(49);
    expect(await panel.locator('svg.icicle rect.hl[data-mark="waste"]').count()).toBe(1);
    expect(await panel.locator('svg.icicle rect.hl[data-mark="ratio"]').count()).toBe(1);
    // Cells take their store's colour: at least one per store.
    const fills = await panel
      .locator("svg.icicle rect.cell")
      .evaluateAll((cells) => new Set(cells.map((cell) => cell.getAttribute("fill"))).size);
    expect(fills).toBeGreaterThan(expected[algorithm].stores);
  }
  expect(
    await page.locator('[data-plan="heuristic"] [data-metric="wasted"] .value').innerText(),
  ).toBe(formatBytes(expected.heuristic.wastedBytesTotal));
  expect(await page.locator('[data-plan="adaptive"] .delta').innerText()).toMatch(/^−\d+% waste$/);

  // Hovering a topic shows its bytes and waste.
  const cell = page.locator('[data-plan="adaptive"] svg.icicle rect.cell').last();
  await cell.hover();
  const tooltip = page.locator("#tooltip");
  await tooltip.waitFor({ state: "visible" });
  expect(await tooltip.innerText()).toMatch(/bytes[\s\S]*waste/);
  await page.mouse.move(0, 0);

  // Clicking a prefix zooms both plans into it; the trail leads back.
  const fx = page.locator('[data-plan="heuristic"] svg.icicle rect.cell.zoom').first();
  const cellsBefore = await page.locator('[data-plan="adaptive"] svg.icicle rect.cell').count();
  await fx.click();
  await page.waitForFunction(() =>
    document.querySelector("#split-crumbs")?.textContent?.includes("desk/fx"),
  );
  expect(await page.locator('[data-plan="adaptive"] svg.icicle rect.cell').count()).toBeLessThan(
    cellsBefore,
  );
  await page.locator("#split-crumbs button", { hasText: "all topics" }).click();
  await page.waitForFunction(
    (count) =>
      document.querySelectorAll('[data-plan="adaptive"] svg.icicle rect.cell').length === count,
    cellsBefore,
  );

  const screenshot = join(makeTempDir("aria-browser-"), "split-view.png");
  await page.screenshot({ path: screenshot, fullPage: true });
  expect([...readFileSync(screenshot).subarray(1, 4)]).toEqual([0x50, 0x4e, 0x47]); // "PNG"
}, 30_000);

test("the overview lists the replicas following the server, with their durable seq", async () => {
  await page.locator('nav [data-view="overview"]').first().click();
  expect(await page.locator("#replicas-card").isHidden()).toBe(true);
  const replica = await startAria({ args: ["--follow", server.tcpUrl, "--node-id", "replica-1"] });
  const leaderSeq = (await server.stats()).broker.visibleSeq - 1;
  await page.waitForFunction(
    (seq) => {
      const cells = document.querySelectorAll('#replicas tr[data-replica="replica-1"] td');
      return cells.length === 5 && cells[2].textContent === seq.toLocaleString("en-US");
    },
    leaderSeq,
    { timeout: 10_000 },
  );
  const cells = await page.locator('#replicas tr[data-replica="replica-1"] td').allInnerTexts();
  expect(cells).toEqual(["replica-1", "in sync", leaderSeq.toLocaleString("en-US"), "0", "0"]);
  await replica.stop();
  await page.waitForFunction(
    () =>
      document.querySelector('#replicas tr[data-replica="replica-1"] td:nth-child(2)')
        ?.textContent === "disconnected",
    undefined,
    { timeout: 10_000 },
  );
}, 30_000);

test("the page loaded nothing from other origins and logged no errors", () => {
  expect(offOrigin).toEqual([]);
  expect(pageErrors).toEqual([]);
});
