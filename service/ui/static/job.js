// The job page: its panels (state, progress, charts, cluster, history) are
// fetched again when the feed says the job changed, and the logs follow the
// job over Server-Sent Events, resuming where they stopped.
"use strict";
(function () {
  const root = document.getElementById("job");
  if (!root || !window.EventSource) return;
  const jobId = root.dataset.jobId;

  // --- panels -------------------------------------------------------------
  let loading = false, again = false;

  async function refresh() {
    if (loading) { again = true; return; }
    loading = true;
    try {
      const resp = await fetch(root.dataset.panelsUrl, { credentials: "same-origin", headers: { Accept: "text/x-fragment" } });
      if (!resp.ok) return;
      const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
      const before = root.querySelector("#panel-header").dataset.state;
      const focused = document.activeElement && document.activeElement.id;
      const openDetails = new Set([...root.querySelectorAll("[data-live] details[open]")].map((d) => d.className));
      doc.querySelectorAll("[data-live]").forEach((fresh) => {
        const old = document.getElementById(fresh.id);
        if (!old) return;
        fresh.querySelectorAll("details").forEach((d) => { if (openDetails.has(d.className)) d.open = true; });
        old.replaceWith(document.importNode(fresh, true));
      });
      const header = root.querySelector("#panel-header");
      root.dataset.updatedAt = header.dataset.updatedAt;
      if (header.dataset.state !== before) TJ.announce("The job is now " + header.dataset.state);
      if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
      TJ.tick();
      TJ.localize();
    } finally {
      loading = false;
      if (again) { again = false; refresh(); }
    }
  }

  // The feed resumes after the last change it gave (its `id:`), also when the page opens it
  // again after being hidden or cached; the panels are read again then, as after an outage.
  let feed = null, lastChange = root.dataset.since, reopened = false;
  TJ.live(() => {
    feed = new EventSource("/ui/stream?job=" + encodeURIComponent(jobId) + "&since=" + encodeURIComponent(lastChange));
    feed.addEventListener("job", (e) => {
      if (e.lastEventId) lastChange = e.lastEventId;
      const change = JSON.parse(e.data);
      if (change.updated_at > root.dataset.updatedAt) refresh();
    });
    feed.addEventListener("reload", refresh);
    TJ.watch(feed, refresh);  // back after an outage: what changed meanwhile is read again
    if (reopened) refresh();
    reopened = true;
  }, () => feed.close());

  // --- logs ---------------------------------------------------------------
  const logs = document.getElementById("logs");
  const pre = document.getElementById("log-lines");
  const status = document.getElementById("log-status");
  const filter = document.getElementById("log-filter");
  const follow = document.getElementById("log-follow");
  const select = document.getElementById("log-replica");
  const download = document.getElementById("log-download");
  const MAX_LINES = 5000;  // the page keeps the newest; the download has them all
  let replica = logs.dataset.replica;
  let cursor = logs.dataset.cursor;
  let source = null;

  // Coloured by severity, not stream: TensorFlow and logging write INFO to stderr.
  const classifiers = new Map();
  function classify(rep, stream, message) {
    // One per replica and stream: a traceback is written to one stream, and the other
    // stream's lines may come between its lines (service/ui/severity.py does the same).
    const key = rep + "\u0000" + stream;
    if (!classifiers.has(key)) classifiers.set(key, TJ.classifier());
    return classifiers.get(key)(message);
  }

  function matches(line, q) { return !q || line.textContent.toLowerCase().includes(q); }

  function applyFilter() {
    const q = filter.value.trim().toLowerCase();
    let shown = 0, total = 0;
    pre.querySelectorAll(".ln").forEach((line) => {
      total += 1;
      line.hidden = !matches(line, q);
      if (!line.hidden) shown += 1;
    });
    logs.dataset.shown = String(shown);
    if (q) status.textContent = shown + " of " + total + " lines contain “" + filter.value.trim() + "”.";
  }

  function append(l) {
    const line = document.createElement("span");
    const severity = classify(l.replica, l.stream, l.message);
    line.className = "ln" + (severity ? " sev-" + severity : "");
    line.dataset.replica = l.replica;
    line.dataset.stream = l.stream;
    line.dataset.severity = severity;
    const ts = document.createElement("time"); ts.className = "ts"; ts.dateTime = l.timestamp;
    ts.title = l.timestamp; ts.dataset.local = "time"; ts.textContent = l.timestamp;
    const rep = document.createElement("span"); rep.className = "rep"; rep.textContent = TJ.visible(l.replica);
    const msg = document.createElement("span"); msg.className = "msg";
    msg.textContent = TJ.visible(l.message);
    line.append(ts, " ", rep, " ", msg, "\n");
    TJ.localize(line);
    line.hidden = !matches(line, filter.value.trim().toLowerCase());
    pre.append(line);
    while (pre.childElementCount > MAX_LINES) pre.firstElementChild.remove();
    if (follow.checked) pre.scrollTop = pre.scrollHeight;
  }

  let quiet = null;  // cancels the pending "Reconnecting…" (TJ.later)
  function settle() { if (quiet) { quiet(); quiet = null; } }

  function open() {
    const q = new URLSearchParams();
    if (replica) q.set("replica", replica);
    if (cursor) q.set("since", cursor);
    source = new EventSource(logs.dataset.streamUrl + "?" + q.toString());
    logs.dataset.follow = "connecting";
    source.onopen = () => {
      settle();
      logs.dataset.follow = "open";
      if (!filter.value) status.textContent = "Following the logs live.";
    };
    source.addEventListener("log", (e) => { const l = JSON.parse(e.data); cursor = l.cursor; append(l); });
    source.addEventListener("end", (e) => {
      const d = JSON.parse(e.data);
      source.close();
      settle();
      logs.dataset.follow = "ended";
      status.textContent = "The job ended (" + d.state + "): every line is shown.";
    });
    source.onerror = () => {
      if (logs.dataset.follow === "ended") return;
      if (source.readyState === EventSource.CLOSED) {
        settle();
        logs.dataset.follow = "closed";
        status.textContent = "Following stopped (signed out, or the logs cannot be read now): reload the page to try again.";
        return;
      }
      // A stream ends every TRAINJOBS_UI_STREAM_MAX_SECONDS and is back within its `retry`:
      // only one still away after a few seconds is worth saying.
      logs.dataset.follow = "retrying";
      if (!quiet) quiet = TJ.later(() => {
        quiet = null;
        if (logs.dataset.follow === "retrying") status.textContent = "Reconnecting to the logs…";
      });
    };
  }

  function close() {
    settle();
    if (source) source.close();
  }

  select.addEventListener("change", () => {
    close();
    replica = select.value;
    cursor = "";
    classifiers.clear();
    pre.replaceChildren();
    const url = new URL(download.href, location.href);
    if (replica) url.searchParams.set("replica", replica); else url.searchParams.delete("replica");
    download.href = url.pathname + url.search;
    const page = new URL(location.href);
    if (replica) page.searchParams.set("replica", replica); else page.searchParams.delete("replica");
    history.replaceState(null, "", page.pathname + page.search + "#logs");
    open();
  });
  filter.addEventListener("input", applyFilter);
  if (follow.checked) pre.scrollTop = pre.scrollHeight;
  // Held only while the page is shown (TJ.live); a job that ended has nothing more to follow.
  TJ.live(() => { if (logs.dataset.follow !== "ended") open(); },
          () => { close(); if (logs.dataset.follow !== "ended") logs.dataset.follow = "paused"; });
})();
