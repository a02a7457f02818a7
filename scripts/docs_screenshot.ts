/**
 * `npm run docs:screenshot`: redraws docs/split-view.png, the README's picture of the web UI's
 * split view, with orders-desk.csv uploaded — the same steps the browser test checks
 * (tests/fixtures/split_view.ts), in headless Debian chromium against the compiled binary. Tests
 * never write the tracked tree; this script is the one place that refreshes the picture.
 */
import { join } from "node:path";
import { launchChromium } from "../tests/fixtures/browser_chromium.ts";
import { cleanupAll, ROOT, startAria } from "../tests/fixtures/e2e_server.ts";
import { ORDERS_DESK_CSV, showUploadedSplit } from "../tests/fixtures/split_view.ts";

const OUTPUT = join(ROOT, "docs", "split-view.png");

const [server, browser] = await Promise.all([startAria({ tipBytes: "64MiB" }), launchChromium()]);
try {
  const page = await browser.newPage({
    viewport: { width: 1480, height: 900 },
    deviceScaleFactor: 1,
  });
  await showUploadedSplit(page, server.adminUrl, ORDERS_DESK_CSV);
  await page.mouse.move(0, 0);
  await page.screenshot({ path: OUTPUT, fullPage: true });
  console.log(`wrote ${OUTPUT}`);
} finally {
  await browser.close();
  await server.stop();
  await cleanupAll();
}
