// Shared by every page: relative times, live durations, confirmations, announcements.
// Pages work without it; it only keeps what they show current.
"use strict";
document.documentElement.classList.add("js");

window.TJ = (function () {
  function duration(ms) {
    let s = Math.max(0, Math.floor(ms / 1000));
    const pad = (n) => String(n).padStart(2, "0");
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + pad(s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h " + pad(Math.floor((s % 3600) / 60)) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  function tick() {
    const now = Date.now();
    document.querySelectorAll("time[data-ago]").forEach((t) => {
      t.textContent = duration(now - Date.parse(t.getAttribute("datetime"))) + " ago";
    });
    document.querySelectorAll(".duration[data-start]").forEach((d) => {
      const start = d.dataset.start, end = d.dataset.end;
      if (!start) { d.textContent = "—"; return; }
      d.textContent = duration((end ? Date.parse(end) : now) - Date.parse(start));
    });
  }

  function announce(text) {
    const region = document.getElementById("announce");
    if (region) region.textContent = text;
  }

  // The markup of _macros.html's state_badge, for states that change in place.
  function stateBadge(state, icons) {
    const badge = document.createElement("span");
    badge.className = "state state-" + state;
    badge.dataset.state = state;
    const icon = document.createElement("span");
    icon.className = "icon";
    icon.setAttribute("aria-hidden", "true");
    icon.textContent = icons[state] || "•";
    const name = document.createElement("span");
    name.className = "name";
    name.textContent = state;
    badge.append(icon, " ", name);
    return badge;
  }

  document.addEventListener("submit", (e) => {
    const message = e.target.dataset && e.target.dataset.confirm;
    if (message && !window.confirm(message)) e.preventDefault();
  });
  tick();
  setInterval(tick, 1000);
  // Control and bidirectional characters as escapes (\x1b, \u202e), as the server renders them
  // (service/text.py visible): what a replica printed is shown, never reorders or hides text.
  const CONTROL = /[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;
  function visible(text) {
    return String(text).replace(CONTROL, (c) => {
      const n = c.charCodeAt(0);
      return n < 0x100 ? "\\x" + n.toString(16).padStart(2, "0") : "\\u" + n.toString(16).padStart(4, "0");
    });
  }

  return { duration, tick, announce, stateBadge, visible };
})();
