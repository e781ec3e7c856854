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
  var since = thread.getAttribute("data-since") || ""; // the server's time of the previous poll (or of the page)
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
        return; // already on the page (a message asked for by id, or one created as the previous poll read)
      }
      var holder = document.createElement("template");
      holder.innerHTML = item.html.trim(); // rendered and escaped by the server's own template
      var element = holder.content.firstElementChild;
      element.classList.add("msg--new");
      thread.appendChild(element);
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

  function fetchJson(url) {
    return fetch(url, {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
      cache: "no-store",
    }).then(function (response) {
      var type = response.headers.get("Content-Type") || "";
      if (!response.ok || type.indexOf("application/json") === -1) {
        throw new Error("signed out or unavailable");
      }
      return response.json();
    });
  }

  // The messages whose status may still change (queued, retrying, with the assistant): the newest hundred.
  function unsettledQuery() {
    var ids = Array.prototype.map.call(
      thread.querySelectorAll('[data-statuses-of][data-settled="false"]'),
      function (element) {
        return element.getAttribute("data-statuses-of");
      }
    );
    return ids.length ? "&unsettled=" + encodeURIComponent(ids.slice(-100).join(",")) : "";
  }

  function refreshStatuses(items) {
    items.forEach(function (item) {
      var bubble = document.getElementById(item.id);
      var shown = bubble && bubble.querySelector("[data-statuses-of]");
      var holder = document.createElement("template");
      holder.innerHTML = item.html.trim(); // rendered and escaped by the server's own template
      var fresh = holder.content.firstElementChild;
      if (shown && fresh) {
        shown.replaceWith(fresh);
      }
    });
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
    fetchJson(updatesUrl + "?since=" + encodeURIComponent(since) + unsettledQuery())
      .then(function (data) {
        append(data.messages);
        refreshStatuses(data.statuses || []);
        since = String(data.since);
        // Ids only, of the messages created just before the previous poll: one missing here committed late.
        var missing = (data.recent || []).filter(function (id) {
          return !document.getElementById(id);
        });
        if (missing.length) {
          return fetchJson(updatesUrl + "?ids=" + encodeURIComponent(missing.join(","))).then(function (late) {
            append(late.messages);
          });
        }
      })
      .then(function () {
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

  // "Show all" on a shortened message: the whole of it in place (the link itself opens the message's own page).
  thread.addEventListener("click", function (event) {
    var link = event.target.closest("[data-expand]");
    if (!link) {
      return;
    }
    event.preventDefault();
    fetchJson(link.href)
      .then(function (data) {
        var holder = document.createElement("template");
        holder.innerHTML = data.html.trim(); // rendered and escaped by the server's own template
        var whole = holder.content.firstElementChild;
        var shown = document.getElementById(data.id);
        if (shown && whole) {
          shown.replaceWith(whole);
        }
      })
      .catch(function () {
        window.location.assign(link.href);
      });
  });

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
