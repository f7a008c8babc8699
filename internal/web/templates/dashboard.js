// rowq's dashboard script: the pages work without it (plain forms, a
// confirmation page, a reload). With it, the sections marked data-live
// are fetched again every few seconds and swapped in place, and an
// action's confirmation shows in a dialog instead of a page of its own.
// Served by rowq itself (the Content-Security-Policy allows no other
// script); no build step.
"use strict";

(function () {
  const live = document.getElementById("live");
  const dialog = document.getElementById("confirm-dialog");

  // refresh fetches this page again, at the same place of its paged
  // tables (its query: ?after=, ?before=, ?status=), and swaps each live
  // section whose user is not busy in it (a ticked box, the focus).
  async function refresh() {
    if (document.hidden || (dialog && dialog.open)) {
      return;
    }
    let res;
    try {
      res = await fetch(location.pathname + location.search, { cache: "no-store", credentials: "same-origin" });
    } catch (e) {
      live.textContent = "update failed: " + e.message;
      return;
    }
    if (res.redirected) {
      location.assign(res.url); // the session ended: the login page
      return;
    }
    const doc = new DOMParser().parseFromString(await res.text(), "text/html");
    if (!res.ok) {
      const msg = doc.querySelector("h1");
      live.textContent = "update failed (" + res.status + ")" + (msg ? ": " + msg.textContent : "");
      return;
    }
    for (const el of document.querySelectorAll("[data-live]")) {
      const fresh = doc.getElementById(el.id);
      if (!fresh || el.querySelector("input:checked") || el.contains(document.activeElement)) {
        continue;
      }
      el.replaceWith(document.adoptNode(fresh));
    }
    live.textContent = "updated " + new Date().toLocaleTimeString();
  }

  if (live && document.querySelector("[data-live]")) {
    live.textContent = "live";
    setInterval(refresh, Number(live.dataset.interval) || 5000);
  }

  // An action's form posts first without confirm=yes: the server answers
  // the confirmation page, whose question the dialog shows (or the
  // refusal, with nothing to confirm). Confirmed, the form is posted
  // again with confirm=yes, as the confirmation page would post it.
  document.addEventListener("submit", async function (ev) {
    const form = ev.target;
    if (!dialog || !form.hasAttribute("data-confirm") || form.dataset.confirmed) {
      return;
    }
    ev.preventDefault();
    const action = (ev.submitter && ev.submitter.getAttribute("formaction")) || form.getAttribute("action");
    const body = new URLSearchParams(new FormData(form));
    let res, doc;
    try {
      res = await fetch(action, { method: "POST", body: body, credentials: "same-origin" });
      doc = new DOMParser().parseFromString(await res.text(), "text/html");
    } catch (e) {
      form.submit(); // the server's confirmation page instead
      return;
    }
    if (res.redirected) {
      location.assign(res.url); // the session ended: the login page
      return;
    }
    const question = doc.getElementById("question");
    const text = document.getElementById("confirm-text");
    const yes = document.getElementById("confirm-yes");
    if (res.ok && question) {
      text.textContent = question.textContent;
      yes.hidden = false;
    } else {
      const msg = doc.querySelector("h1");
      text.textContent = msg ? msg.textContent : "HTTP " + res.status;
      yes.hidden = true;
    }
    dialog.returnValue = "";
    dialog.showModal();
    dialog.addEventListener("close", function () {
      if (dialog.returnValue !== "yes" || yes.hidden) {
        return;
      }
      const confirm = document.createElement("input");
      confirm.type = "hidden";
      confirm.name = "confirm";
      confirm.value = "yes";
      const was = form.getAttribute("action");
      form.appendChild(confirm);
      form.action = action;
      form.dataset.confirmed = "1";
      form.submit();
      // The form's data is taken: put it back as it was, so that a page
      // restored by the Back button asks again.
      confirm.remove();
      form.setAttribute("action", was);
      delete form.dataset.confirmed;
    }, { once: true });
  });
})();
