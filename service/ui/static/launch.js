// The launch form: after a preview or a refusal, move the focus to what changed.
"use strict";
(function () {
  const target = document.getElementById("h-preview") || document.getElementById("form-errors");
  if (target) {
    if (!target.hasAttribute("tabindex")) target.setAttribute("tabindex", "-1");
    target.focus();
    target.scrollIntoView({ block: "start" });
  }
})();
