// The plan form's conversation with the server, said where the user is (a static file: the
// Content-Security-Policy allows no inline script):
// * an answer that is not a page (a 500, a 503 while the database is down, a 429, a network
//   failure) was dropped by htmx without a word: the button came back and nothing changed;
//   now a message beside the button says what happened and that the form is kept;
// * a progress check that fails says so inside the results, and polling goes on (or stops
//   with a way forward when the search is gone);
// * the results came in below a long form at phone width, out of sight and unannounced: the
//   focus now moves to the results' heading when the search starts (so the page scrolls to
//   it), and the outcome is read out by a live region that the polls do not replace.
(function () {
  "use strict";

  function problemText(xhr) {
    // the API's problem JSON ({title, detail}); a proxy's HTML error page has neither
    var body = null;
    try { body = JSON.parse(xhr.responseText); } catch (e) { body = null; }
    var title = (body && body.title) || xhr.statusText || "error";
    var detail = body && body.detail && body.detail !== title ? ": " + body.detail : "";
    return "HTTP " + xhr.status + " " + title + detail;
  }

  function retryText(xhr) {
    var after = xhr && Number(xhr.getResponseHeader("Retry-After"));
    return after > 0 ? " in " + after + " s" : "";
  }

  function say(el, text) {
    if (!el) return;
    if (el.textContent !== text) el.textContent = text;  // role=alert reads out each change
    el.hidden = !text;
  }

  // a poller: the plan's progress (#job), a batch's jobs, the recent batches
  function isPoll(detail) {
    var trigger = detail.elt && detail.elt.getAttribute && detail.elt.getAttribute("hx-trigger");
    return !!(trigger && /^every /.test(trigger) && detail.elt.id);
  }

  function formError(detail, failed) {
    var text = failed
      ? "The server did not answer (it may be down, or the network is). "
      : "The server could not take this search (" + problemText(detail.xhr) + "). ";
    var button = document.querySelector("#plan-form button[type=submit]");
    var name = button ? "“" + button.textContent.trim() + "”" : "the button";
    say(document.getElementById("submit-error"), text + "Your form is kept as you left it: press " +
      name + " again" + (failed ? " once it is back" : retryText(detail.xhr)) +
      ", or reload the page if this keeps happening.");
  }

  function pollError(detail, failed) {
    var box = detail.elt, id = box.id === "job" ? "poll-error" : box.id + "-poll-error";
    var plan = box.id === "job";
    var note = document.getElementById(id);
    if (!note) {
      note = document.createElement("p");
      note.id = id; note.className = "form-error"; note.setAttribute("role", "alert");
      box.appendChild(note);
    }
    if (!failed && detail.xhr.status === 404) {
      // the work is gone (a restart, or a deletion): stop asking, say what to do
      var still = box.cloneNode(true);
      still.removeAttribute("hx-get"); still.removeAttribute("hx-trigger");
      box.replaceWith(still);
      say(still.querySelector("#" + id), "This " + (plan ? "search" : "list") +
        " is no longer on the server (" + problemText(detail.xhr) + "). " +
        (plan ? "Press the button of the form to plan it again." : "Reload the page to see what is left."));
      return;
    }
    say(note, "The last progress check got no answer (" + (failed ? "no connection" :
      problemText(detail.xhr)) + "); still trying. The work runs on the server: " +
      (plan ? "its results show" : "this part is brought up to date") +
      " here as soon as the server answers again.");
  }

  function failedRequest(event, failed) {
    var detail = event.detail || {};
    if (isPoll(detail)) pollError(detail, failed);
    else if (detail.elt && detail.elt.closest && detail.elt.closest("#plan-form")) formError(detail, failed);
  }
  document.addEventListener("htmx:responseError", function (e) { failedRequest(e, false); });
  document.addEventListener("htmx:sendError", function (e) { failedRequest(e, true); });
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (elt && elt.id === "plan-form") say(document.getElementById("submit-error"), "");
  });

  function announce() {
    var job = document.getElementById("job"), live = document.getElementById("results-live");
    if (!job || !live || !job.dataset.announce) return;
    // set after the region has settled in the page, or a screen reader may not notice it
    setTimeout(function () { live.textContent = job.dataset.announce; }, 100);
  }

  document.addEventListener("htmx:afterSettle", function (event) {
    var config = (event.detail && event.detail.requestConfig) || {};
    var title = document.getElementById("job-title");
    if (config.verb === "post" && /\/plans$/.test(config.path || "") && title) {
      title.focus();  // a new search started (no form errors): go to its progress
    } else if (title && document.activeElement === document.body && /\/status$/.test(config.path || "")) {
      title.focus();  // the focused heading was swapped out under the user
    }
    announce();
  });
})();
