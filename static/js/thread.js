// The conversation page: new messages appear without a reload, and the composer sends without leaving the page.
// Without JavaScript the page still works: the form posts and the server redirects back to the thread.
(function () {
  "use strict";

  var POLL_EVERY_MS = 2000;
  var POLL_EVERY_HIDDEN_MS = 15000;

  var thread = document.querySelector("[data-thread]");
  var updatesUrl = thread && thread.getAttribute("data-updates-url");
  if (!updatesUrl) {
    return; // no thread, or a page of earlier messages: nothing new arrives there
  }
  var cursor = thread.getAttribute("data-cursor") || "";
  var status = document.querySelector("[data-live-status]");
  var timer = null;
  var inFlight = false;

  function setStatus(text, live) {
    if (status) {
      status.textContent = text;
      status.classList.toggle("is-paused", !live);
    }
  }

  function scrollToNewest() {
    window.scrollTo(0, document.body.scrollHeight);
  }

  function nearBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 200;
  }

  function append(items) {
    var follow = nearBottom();
    var added = 0;
    items.forEach(function (item) {
      if (document.getElementById(item.id)) {
        return; // already on the page (the poll looks back a little; see the view)
      }
      var holder = document.createElement("template");
      holder.innerHTML = item.html.trim(); // rendered and escaped by the server's own template
      var element = holder.content.firstElementChild;
      element.classList.add("msg--new");
      thread.appendChild(element);
      if (window.consoleUi) {
        window.consoleUi.localizeTimes(element);
      }
      added += 1;
    });
    if (added) {
      var empty = document.querySelector("[data-empty-thread]");
      if (empty) {
        empty.remove();
      }
      if (follow) {
        scrollToNewest();
      }
    }
  }

  function schedule(delay) {
    window.clearTimeout(timer);
    timer = window.setTimeout(poll, delay);
  }

  function poll() {
    if (inFlight) {
      return;
    }
    inFlight = true;
    fetch(updatesUrl + "?after=" + encodeURIComponent(cursor), {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
      cache: "no-store",
    })
      .then(function (response) {
        var type = response.headers.get("Content-Type") || "";
        if (!response.ok || type.indexOf("application/json") === -1) {
          throw new Error("signed out or unavailable");
        }
        return response.json();
      })
      .then(function (data) {
        append(data.messages);
        cursor = String(data.cursor);
        setStatus("Live", true);
      })
      .catch(function () {
        setStatus("Reconnecting…", false);
      })
      .finally(function () {
        inFlight = false;
        schedule(document.hidden ? POLL_EVERY_HIDDEN_MS : POLL_EVERY_MS);
      });
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) {
      schedule(0);
    }
  });

  var composer = document.querySelector("[data-composer]");
  if (composer) {
    var textarea = composer.querySelector("textarea");
    var button = composer.querySelector("button[type=submit]");
    var error = composer.querySelector("[data-composer-error]");

    textarea.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        composer.requestSubmit();
      }
    });

    composer.addEventListener("submit", function (event) {
      event.preventDefault();
      error.textContent = "";
      button.disabled = true;
      fetch(composer.action, {
        method: "POST",
        body: new FormData(composer),
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      })
        .then(function (response) {
          return response.json().then(function (data) {
            if (!response.ok) {
              throw new Error(data.message || "The message was not sent. Try again.");
            }
          });
        })
        .then(function () {
          textarea.value = "";
          schedule(0);
        })
        .catch(function (failure) {
          error.textContent = failure instanceof SyntaxError ? "The message was not sent. Try again." : failure.message;
        })
        .finally(function () {
          button.disabled = false;
          textarea.focus();
        });
    });
  }

  // Newest at the bottom, so open the page there (unless a link points at one message).
  if (!window.location.hash) {
    scrollToNewest();
  }
  schedule(0);
})();
