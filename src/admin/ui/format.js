// Formatting and DOM helpers shared by the views. Byte sizes use binary units exactly as the
// command line prints them (formatBytes of src/stdx/format_bytes.ts; a test keeps the two
// equal), so a figure in the UI and in `aria split plan` reads the same.

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/** 1234567 -> "1.2 MiB". */
export function formatBytes(bytes) {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return "—";
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0
    ? `${value.toFixed(0)} B`
    : `${value.toFixed(value >= 100 ? 0 : 1)} ${BYTE_UNITS[unit]}`;
}

/** 1234567 -> "1,234,567". */
export function formatCount(count) {
  if (count === null || count === undefined || !Number.isFinite(count)) return "—";
  return Math.round(count).toLocaleString("en-US");
}

/** A rate with a sensible number of digits: 0.5, 12.3, 1,234. */
export function formatRate(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  if (value >= 100) return formatCount(value);
  return value.toFixed(value >= 10 ? 1 : value > 0 ? 2 : 0);
}

/** 0.4567 -> "45.7%". */
export function formatPercent(fraction) {
  if (!Number.isFinite(fraction)) return "—";
  const percent = fraction * 100;
  if (percent > 0 && percent < 0.1) return "<0.1%";
  return `${percent.toFixed(percent > 0 && percent < 10 ? 1 : 0)}%`;
}

/** A ratio of bytes read to bytes wanted: "419.8×". */
export function formatRatio(ratio) {
  if (!Number.isFinite(ratio)) return "—";
  return `${ratio >= 100 ? ratio.toFixed(0) : ratio.toFixed(ratio >= 10 ? 1 : 2)}×`;
}

/** Creates an element: el("li", { class: "x", text: "hi" }, child, ...). */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

/** Creates an SVG element with attributes. */
export function svg(tag, attributes = {}) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attributes))
    if (value !== undefined && value !== null) node.setAttribute(name, String(value));
  return node;
}

/** Sets the text of every `[data-field=name]` under `root`. */
export function setField(root, name, text) {
  for (const node of root.querySelectorAll(`[data-field="${name}"]`)) node.textContent = text;
}
