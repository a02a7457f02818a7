/**
 * The web UI's static files, bundled into the program as strings: each is imported as text, which
 * Bun inlines both under `bun test` and in `bun build --compile`, so dist/aria serves the UI with
 * no files beside it and no build step for the user. Nothing here loads from the network: the
 * Content-Security-Policy lets the page reach only its own origin.
 *
 * To add a file: put it in ui/, import it below, add it to UI_ASSETS (and, for a script, a line to
 * ui_text_modules.d.ts).
 */
import { assert } from "../stdx/assert.ts";
import api from "./ui/api.js" with { type: "text" };
import app from "./ui/app.js" with { type: "text" };
import format from "./ui/format.js" with { type: "text" };
import icicle from "./ui/icicle.js" with { type: "text" };
import indexHtml from "./ui/index.html" with { type: "text" };
import overview from "./ui/overview.js" with { type: "text" };
import split from "./ui/split.js" with { type: "text" };
import style from "./ui/style.css" with { type: "text" };
import topics from "./ui/topics.js" with { type: "text" };

/** One static file and its content type. */
export interface UiAsset {
  readonly body: string;
  readonly contentType: string;
}

const JAVASCRIPT = "text/javascript; charset=utf-8";

// bun-types declare `*.html` as an HTML bundle (the import without the text attribute): with it,
// the import is a string, which the assert below checks at load.
const html = indexHtml as unknown as string;

/** The page served at `/`. */
export const UI_INDEX: UiAsset = { body: html, contentType: "text/html; charset=utf-8" };

/** The files under `/ui/`, by name. */
export const UI_ASSETS: ReadonlyMap<string, UiAsset> = new Map([
  ["style.css", { body: style, contentType: "text/css; charset=utf-8" }],
  ["app.js", { body: app, contentType: JAVASCRIPT }],
  ["api.js", { body: api, contentType: JAVASCRIPT }],
  ["format.js", { body: format, contentType: JAVASCRIPT }],
  ["overview.js", { body: overview, contentType: JAVASCRIPT }],
  ["topics.js", { body: topics, contentType: JAVASCRIPT }],
  ["split.js", { body: split, contentType: JAVASCRIPT }],
  ["icicle.js", { body: icicle, contentType: JAVASCRIPT }],
]);

/** The UI's policy: its own origin only (works offline, nothing injected runs). */
export const UI_CONTENT_SECURITY_POLICY =
  "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

for (const asset of [UI_INDEX, ...UI_ASSETS.values()])
  assert(typeof asset.body === "string" && asset.body.length > 0, "UI files are bundled as text");
