// The admin UI's entry: tabs (from the address's #hash), the connection badge, the token bar,
// and the three views. No framework and no build step: the server serves these files as they are.
import { onUnauthorized, setToken, takeTokenFromAddress } from "./api.js";
import { startOverview } from "./overview.js";
import { startSplit } from "./split.js";
import { startTopics } from "./topics.js";

const VIEWS = ["overview", "topics", "split"];

takeTokenFromAddress();
const overview = startOverview(document.getElementById("view-overview"), setConnection);
const topics = startTopics(document.getElementById("view-topics"));
const split = startSplit(document.getElementById("view-split"));

function showView() {
  const name = VIEWS.includes(location.hash.slice(1)) ? location.hash.slice(1) : "overview";
  for (const section of document.querySelectorAll("section.view"))
    section.hidden = section.dataset.view !== name;
  for (const link of document.querySelectorAll(".tabs a"))
    link.classList.toggle("active", link.dataset.view === name);
  if (name === "topics") topics.show();
  if (name === "split") split.show();
  document.body.dataset.view = name;
}

/** The badge in the top bar: ok with the time of the last answer, or why not. */
function setConnection(ok, text) {
  const badge = document.getElementById("conn");
  badge.classList.toggle("ok", ok);
  badge.classList.toggle("bad", !ok);
  document.getElementById("conn-text").textContent = text;
}

const authbar = document.getElementById("authbar");
onUnauthorized(() => {
  authbar.hidden = false;
});
authbar.addEventListener("submit", (event) => {
  event.preventDefault();
  setToken(document.getElementById("token-input").value.trim());
  authbar.hidden = true;
  overview.refresh();
  showView();
});

window.addEventListener("hashchange", showView);
showView();
