// Small progressive enhancements shared by every console page. Pages work without it.
(function () {
  "use strict";

  // Times are not rewritten here: the server writes every one in the person's own time zone (Settings), one way.

  function copyWithSelection(text) {
    var scratch = document.createElement("textarea");
    scratch.value = text;
    scratch.setAttribute("readonly", "");
    scratch.className = "visually-hidden";
    document.body.appendChild(scratch);
    scratch.select();
    var copied = false;
    try {
      copied = document.execCommand("copy");
    } catch (error) {
      copied = false;
    }
    scratch.remove();
    return copied ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(function () {
        return copyWithSelection(text);
      });
    }
    return copyWithSelection(text);
  }

  function announce(message) {
    var status = document.querySelector("[data-copy-status]");
    if (status) {
      status.textContent = message;
    }
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy-from]");
    if (!button) {
      return;
    }
    var source = document.getElementById(button.getAttribute("data-copy-from"));
    if (!source) {
      return;
    }
    var text = "value" in source && source.tagName === "INPUT" ? source.value : source.textContent;
    var label = button.firstChild.textContent;
    copyText(text).then(
      function () {
        button.firstChild.textContent = "Copied";
        announce("Copied to the clipboard.");
        window.setTimeout(function () {
          button.firstChild.textContent = label;
        }, 2000);
      },
      function () {
        if (source.tagName === "INPUT") {
          source.focus();
          source.select();
        }
        announce("Copying is blocked here: press Ctrl+C (or ⌘C) to copy the selection.");
      }
    );
  });

  // A time zone field (Settings) offers this browser's own zone, which the server cannot know.
  function offerBrowserTimeZone(input) {
    var zone = "";
    try {
      zone = new Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    } catch (error) {
      return;
    }
    if (!zone || zone === input.value) {
      return;
    }
    var button = document.createElement("button");
    button.type = "button";
    button.className = "btn btn--secondary btn--small field__suggestion";
    button.textContent = "Use this device's zone: " + zone;
    button.addEventListener("click", function () {
      input.value = zone;
      input.focus();
      button.remove();
    });
    input.insertAdjacentElement("afterend", button);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("input[data-browser-time-zone]").forEach(offerBrowserTimeZone);
  });
})();
