// Parts of a page that follow the service without a reload (the Queue page, a waiting job's
// "In the queue"): an element with data-refresh-ms is read again from the page's own address
// every so often while the page is shown (TJ.live: a hidden tab or a page left holds nothing),
// and its content replaced by the same element's in the answer; gone from the answer (the job
// launched), it goes from the page too.
"use strict";
(function () {
  document.querySelectorAll("[data-refresh-ms]").forEach((el) => {
    const every = Math.max(1000, parseInt(el.dataset.refreshMs, 10) || 5000);
    let timer = null, busy = false;
    function stop() { if (timer) { clearInterval(timer); timer = null; } }
    async function once() {
      if (busy) return;
      busy = true;
      try {
        const r = await fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } });
        if (!r.ok) return;
        const doc = new DOMParser().parseFromString(await r.text(), "text/html");
        const fresh = doc.getElementById(el.id);
        if (!fresh) { stop(); (el.closest("[data-refresh-gone]") || el).remove(); return; }
        el.replaceChildren(...Array.from(fresh.childNodes).map((n) => document.importNode(n, true)));
        TJ.localize();
      } catch (e) {
        // Offline for a moment: the next tick reads again.
      } finally {
        busy = false;
      }
    }
    TJ.live(() => { if (!timer) timer = setInterval(once, every); }, stop);
  });
})();
