// Pages that show a new key's secret answer the POST that created it. Make sure that reloading, or coming back to
// this page with Back, never shows the secret again and never resubmits the form:
// - the history entry is rewritten to the list page (a reload becomes a GET of that page);
// - the secret leaves the DOM when the page is hidden, and a page restored from the back/forward cache is replaced.
// The server backs this up: each form carries a one-time token, so a resubmission creates nothing.
(function () {
  "use strict";

  var page = document.querySelector("[data-shown-once]");
  if (page) {
    var leaveTo = page.getAttribute("data-leave-to");
    if (leaveTo && window.history.replaceState) {
      window.history.replaceState(null, "", leaveTo);
    }
    window.addEventListener("pagehide", function () {
      document.querySelectorAll("[data-secret]").forEach(function (input) {
        input.value = "";
      });
      document.querySelectorAll("pre.code code").forEach(function (code) {
        code.textContent = "";
      });
    });
    window.addEventListener("pageshow", function (event) {
      if (event.persisted && leaveTo) {
        window.location.replace(leaveTo);
      }
    });
  }

  // A double click must not send the form twice.
  document.querySelectorAll("form[data-submit-once]").forEach(function (form) {
    form.addEventListener("submit", function () {
      form.querySelectorAll("button[type=submit]").forEach(function (button) {
        window.setTimeout(function () {
          button.disabled = true;
        }, 0);
      });
    });
  });
})();
