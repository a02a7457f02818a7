// Topic tree browser: /api/topics one level at a time. A row opens to its children (fetched when
// first opened); each row shows the subtree's topics, messages and bytes and its share of the
// bytes of the prefix shown.
import { api } from "./api.js";
import { el, formatBytes, formatCount, formatPercent } from "./format.js";

/** Sets up the view; show() loads it (again). */
export function startTopics(root) {
  const body = root.querySelector("#topics-body");
  const error = root.querySelector("#topics-error");
  const prefixInput = root.querySelector("#topics-prefix");
  let loaded = false;

  async function load() {
    loaded = true;
    error.hidden = true;
    const prefix = prefixInput.value.trim().replace(/\/+$/, "");
    try {
      const answer = await api(
        `api/topics?depth=1${prefix === "" ? "" : `&prefix=${encodeURIComponent(prefix)}`}`,
      );
      body.replaceChildren();
      const total = answer.node.bytes;
      if (answer.node.topics === 0) {
        body.append(
          el(
            "tr",
            {},
            el("td", {
              colspan: "5",
              class: "note",
              text: "No topics yet: publish messages and refresh.",
            }),
          ),
        );
        return;
      }
      const rows = prefix === "" ? (answer.node.children ?? []) : [answer.node];
      for (const node of rows)
        insertRow(body, null, node, 0, total, prefix !== "" ? answer.node : null);
      omittedRow(body, null, prefix === "" ? answer.node : null, 0);
    } catch (failure) {
      error.textContent = failure.message;
      error.hidden = false;
    }
  }

  root.querySelector("#topics-form").addEventListener("submit", (event) => {
    event.preventDefault();
    void load();
  });
  root.querySelector("#topics-refresh").addEventListener("click", () => void load());
  return {
    show() {
      if (!loaded) void load();
    },
  };
}

/** Adds the row of `node` after `after` (or at the end); `opened` holds its children if known. */
function insertRow(body, after, node, level, total, opened) {
  const row = el("tr", {
    "data-path": node.path,
    class: node.hasChildren ? "open-able" : undefined,
  });
  const twisty = el("span", { class: "twisty", text: node.hasChildren ? "▸" : "" });
  const name = el(
    "td",
    { class: "name" },
    twisty,
    node.name === "" ? "(all)" : level === 0 ? node.path : node.name,
  );
  name.style.paddingLeft = `${14 + level * 20}px`;
  if (node.isTopic && node.hasChildren)
    name.append(el("span", { class: "own", text: `itself ${formatBytes(node.ownBytes)}` }));
  const bar = el("div", { class: "bar" }, el("span"));
  bar.firstChild.style.width = `${total > 0 ? Math.max(0.5, (node.bytes / total) * 100) : 0}%`;
  row.append(
    name,
    el("td", { class: "num", text: formatCount(node.topics) }),
    el("td", { class: "num", text: formatCount(node.messages) }),
    el("td", { class: "num", text: formatBytes(node.bytes) }),
    el("td", { class: "share", title: formatPercent(total > 0 ? node.bytes / total : 0) }, bar),
  );
  if (after === null) body.append(row);
  else after.after(row);
  row.dataset.level = String(level);
  let children = opened?.children ?? null;
  let open = false;
  async function toggle() {
    if (!node.hasChildren) return;
    open = !open;
    twisty.textContent = open ? "▾" : "▸";
    if (!open) {
      // Everything below the row down to the next row of its level or above is its subtree.
      while (
        row.nextElementSibling !== null &&
        Number(row.nextElementSibling.dataset.level) > level
      )
        row.nextElementSibling.remove();
      return;
    }
    if (children === null) {
      try {
        const answer = await api(`api/topics?depth=1&prefix=${encodeURIComponent(node.path)}`);
        children = answer.node.children ?? [];
        node.childrenOmitted = answer.node.childrenOmitted;
      } catch (failure) {
        open = false;
        twisty.textContent = "▸";
        row.title = failure.message;
        return;
      }
    }
    let last = row;
    for (const child of children) last = insertRow(body, last, child, level + 1, total, null);
    omittedRow(body, last, node, level + 1);
  }
  row.addEventListener("click", () => void toggle());
  if (opened !== null) void toggle();
  return row;
}

function omittedRow(body, after, node, level) {
  if (node === null || !(node.childrenOmitted > 0)) return null;
  const cell = el("td", {
    colspan: "5",
    class: "note",
    text: `… ${formatCount(node.childrenOmitted)} smaller children not listed`,
  });
  cell.style.paddingLeft = `${34 + level * 20}px`;
  const row = el("tr", { "data-level": String(level) }, cell);
  if (after === null) body.append(row);
  else after.after(row);
  return row;
}
