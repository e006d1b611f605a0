// memhub dashboard: the only script (Content-Security-Policy: script-src 'self').
// Counts a proposal's review window down; everything else works without JavaScript.
"use strict";
(function () {
  function fmt(seconds) {
    const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    return [h ? h + " h" : "", m ? m + " min" : "", s ? s + " s" : ""].filter(Boolean).join(" ") || "0 s";
  }
  function tick() {
    document.querySelectorAll(".window[data-left]").forEach(function (el) {
      const left = Math.max(0, parseInt(el.dataset.left, 10) - 1);
      el.dataset.left = String(left);
      el.textContent = left > 0 ? fmt(left) + " of review left" : "review window passed: reload to accept";
    });
  }
  if (document.querySelector(".window[data-left]")) setInterval(tick, 1000);
})();
