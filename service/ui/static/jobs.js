// The jobs list: states, progress and run times change in place as the
// service's feed (/ui/stream, Server-Sent Events) reports them.
"use strict";
(function () {
  const table = document.getElementById("jobs");
  if (!table || !window.EventSource) return;
  const icons = JSON.parse(table.dataset.icons);
  const since = table.dataset.since;
  const status = document.getElementById("live-status");

  function progress(cell, epoch, epochs) {
    if (epoch === null || epoch === undefined) return;
    cell.textContent = "";
    const wrap = document.createElement("span");
    wrap.className = "progress";
    if (epochs) {
      const bar = document.createElement("progress");
      bar.max = epochs;
      bar.value = Math.min(epoch, epochs);
      bar.setAttribute("aria-label", "epoch " + epoch + " of " + epochs);
      wrap.append(bar, " ");
    }
    const text = document.createElement("span");
    text.className = "epochs";
    text.textContent = epochs ? "epoch " + epoch + "/" + epochs : "epoch " + epoch;
    wrap.append(text);
    cell.append(wrap);
  }

  function apply(change) {
    const row = table.querySelector('tr[data-job-id="' + change.id + '"]');
    if (!row) {
      if (table.dataset.filtered === "false" && change.created_at > since) {
        document.getElementById("new-jobs").hidden = false;
      }
      return;
    }
    if (change.updated_at < row.dataset.updatedAt) return;  // older news than the row shows
    row.dataset.updatedAt = change.updated_at;
    if (row.dataset.state !== change.state) {
      row.dataset.state = change.state;
      const cell = row.querySelector(".state-cell");
      cell.replaceChildren(TJ.stateBadge(change.state, icons, change.preempted));
      TJ.announce(TJ.visible(change.display_name) + " is now " + (change.preempted ? "PREEMPTED" : change.state));
      const place = row.querySelector(".queue-place");
      if (place && change.state !== "QUEUED") place.remove();  // launched: no place in the queue any more
    }
    progress(row.querySelector(".progress-cell"), change.epoch, change.epochs);
    const d = row.querySelector(".duration");
    d.dataset.start = change.started_at || "";
    d.dataset.end = change.ended_at || "";
    TJ.tick();
  }

  // Held only while the page is shown (TJ.live): opened again, the feed resumes after the
  // last change it gave (its `id:`), so nothing that changed meanwhile is missed.
  let source = null, lastChange = since, quiet = null;
  function settle() { if (quiet) { quiet(); quiet = null; } }
  TJ.live(() => {
    source = new EventSource("/ui/stream?since=" + encodeURIComponent(lastChange));
    source.addEventListener("job", (e) => {
      if (e.lastEventId) lastChange = e.lastEventId;
      apply(JSON.parse(e.data));
    });
    TJ.watch(source);  // the feed resumes from its last event id: nothing missed is lost
    source.addEventListener("reload", () => { document.getElementById("new-jobs").hidden = false; });
    source.onopen = () => {
      settle();
      status.textContent = "Live: states update by themselves.";
      table.dataset.live = "open";
    };
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        settle();
        status.textContent = "Live updates stopped (signed out?): reload the page.";
        table.dataset.live = "closed";
        return;
      }
      // A stream's normal end (every TRAINJOBS_UI_STREAM_MAX_SECONDS) is back within its retry.
      table.dataset.live = "retrying";
      if (!quiet) quiet = TJ.later(() => {
        quiet = null;
        if (table.dataset.live === "retrying") status.textContent = "Reconnecting to the live feed…";
      });
    };
  }, () => { settle(); source.close(); table.dataset.live = "paused"; });
})();
