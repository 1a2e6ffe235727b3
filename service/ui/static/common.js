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
    if (offline) return;
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

  // Times are sent as UTC (<time datetime> with the UTC in its title); shown in the browser's
  // zone in the pages' one format: `2026-11-26 14:05:09 GMT+5:30` (the server's without
  // JavaScript: `2026-11-26 08:35:09 UTC`); data-local="time" (log lines) keeps only the time
  // of day with milliseconds, `14:05:09.123`, as the server writes it in UTC.
  const DATE_TIME = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short" });
  const TIME = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit",
    fractionalSecondDigits: 3, hourCycle: "h23" });
  function format(at, fmt) {
    const p = {};
    fmt.formatToParts(at).forEach((part) => { p[part.type] = part.value; });
    const clock = p.hour + ":" + p.minute + ":" + p.second;
    if (fmt === TIME) return clock + "." + p.fractionalSecond;
    return p.year + "-" + p.month + "-" + p.day + " " + clock + " " + p.timeZoneName;
  }
  function localize(root) {
    (root || document).querySelectorAll("time[data-local]:not([data-localized])").forEach((t) => {
      const at = new Date(t.getAttribute("datetime"));
      if (isNaN(at)) return;
      t.textContent = format(at, t.dataset.local === "time" ? TIME : DATE_TIME);
      t.dataset.localized = "";
    });
  }

  // While a page's live feed is cut (the service stopped or restarts), the whole page says so
  // and its running clocks stop: a RUNNING job must not seem to tick on while nobody knows.
  // A stream also ends every TRAINJOBS_UI_STREAM_MAX_SECONDS and is back after its `retry:`
  // (2 s): only a feed still cut after OFFLINE_AFTER_MS is an outage worth a sign.
  const OFFLINE_AFTER_MS = 4000;
  let offline = false, pending = null;
  function watch(source, onBack) {
    source.addEventListener("error", () => {
      if (offline || pending) return;
      pending = setTimeout(() => {
        pending = null;
        if (source.readyState === EventSource.OPEN) return;
        offline = true;
        document.documentElement.dataset.offline = "true";
        document.getElementById("offline").hidden = false;
      }, OFFLINE_AFTER_MS);
    });
    source.addEventListener("open", () => {
      if (pending) { clearTimeout(pending); pending = null; }
      if (!offline) return;
      offline = false;
      delete document.documentElement.dataset.offline;
      document.getElementById("offline").hidden = true;
      if (onBack) onBack();
      tick();
    });
  }

  // A page holds its event streams only while it is shown. Chromium's back/forward cache
  // keeps a page that was left, and its open streams, for minutes, and a browser opens at
  // most six HTTP/1.1 connections to one host: a few cached pages or background tabs with
  // live streams and the next page load waits. So a hidden tab or a page being left
  // (pagehide, cached or not) closes its streams; shown again, it opens them anew and reads
  // what changed meanwhile (docs/ui.md "How many connections a page holds").
  const shown = [];
  let suspended = false;
  function live(start, stop) {
    shown.push({ start, stop });
    if (!suspended) start();
  }
  function suspend() {
    if (suspended) return;
    suspended = true;
    if (pending) { clearTimeout(pending); pending = null; }
    shown.forEach((s) => s.stop());
  }
  function resume() {
    if (!suspended || document.visibilityState === "hidden") return;
    suspended = false;
    shown.forEach((s) => s.start());
  }
  window.addEventListener("pagehide", suspend);
  window.addEventListener("pageshow", (e) => { if (e.persisted) resume(); });
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") suspend(); else resume();
  });
  if (document.visibilityState === "hidden") suspended = true;  // opened in a background tab

  // What a stream's own status line says while it reconnects: nothing for the first
  // OFFLINE_AFTER_MS, so the normal end of a stream every TRAINJOBS_UI_STREAM_MAX_SECONDS
  // (back within its 2 s `retry`) does not flash "Reconnecting…".
  function later(fn) {
    const timer = setTimeout(fn, OFFLINE_AFTER_MS);
    return () => clearTimeout(timer);
  }

  function announce(text) {
    const region = document.getElementById("announce");
    if (region) region.textContent = text;
  }

  // The markup of _macros.html's state_badge, for states that change in place.
  // A preempted attempt (FAILED for another job's sake) shows as PREEMPTED, as markup.py does.
  function stateBadge(state, icons, preempted) {
    const shown = preempted ? "PREEMPTED" : state;
    const badge = document.createElement("span");
    badge.className = "state state-" + shown;
    badge.dataset.state = state;
    if (preempted) badge.dataset.preempted = "true";
    const icon = document.createElement("span");
    icon.className = "icon";
    icon.setAttribute("aria-hidden", "true");
    icon.textContent = preempted ? "⤼" : (icons[state] || "•");
    const name = document.createElement("span");
    name.className = "name";
    name.textContent = shown;
    badge.append(icon, " ", name);
    return badge;
  }

  document.addEventListener("submit", (e) => {
    const message = e.target.dataset && e.target.dataset.confirm;
    if (message && !window.confirm(message)) e.preventDefault();
  });
  tick();
  setInterval(tick, 1000);
  localize();
  // A notice (?notice=launched) is said once: reloading or going back must not repeat it.
  const page = new URL(location.href);
  if (page.searchParams.has("notice")) {
    page.searchParams.delete("notice");
    history.replaceState(history.state, "", page.pathname + page.search + page.hash);
  }
  // Control and bidirectional characters as escapes (\x1b, \u202e), as the server renders them
  // (service/text.py visible): what a replica printed is shown, never reorders or hides text.
  const CONTROL = /[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;
  function visible(text) {
    return String(text).replace(CONTROL, (c) => {
      const n = c.charCodeAt(0);
      return n < 0x100 ? "\\x" + n.toString(16).padStart(2, "0") : "\\u" + n.toString(16).padStart(4, "0");
    });
  }

  // A log line's severity, for its colour: the rules of service/ui/severity.py (kept to one
  // table of lines by tests/ui), one classifier per replica and stream since a traceback spans lines.
  const TB_HEAD = /^Traceback \(most recent call last\):/;
  const TB_BODY = /^\s+(File ".*", line \d+|\S)/;
  const ERROR = /\b(ERROR|CRITICAL|FATAL)\b|^[EF]\d{4} \d\d:|: [EF] \S+:\d+\]|^([A-Za-z_][\w.]*)?(Error|Exception|Interrupt|Exit)(: |:?$)|^[\w.-]+: error: /;
  const WARNING = /\b(WARNING|WARN)\b|^W\d{4} \d\d:|: W \S+:\d+\]|\b\w*Warning: /;
  function classifier() {
    let inTraceback = false;
    return (message) => {
      if (TB_HEAD.test(message)) { inTraceback = true; return "traceback"; }
      if (inTraceback) {
        if (TB_BODY.test(message)) return "traceback";
        inTraceback = false;
        return "error";
      }
      if (ERROR.test(message)) return "error";
      if (WARNING.test(message)) return "warning";
      return "";
    };
  }

  return { duration, tick, localize, watch, live, later, announce, stateBadge, visible, classifier };
})();
