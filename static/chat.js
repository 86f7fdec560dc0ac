// Parley chat page: keyboard sending, Send that becomes Stop, never losing a typed message,
// copy, edit, rename in place and the feedback panel. Streaming itself is htmx's ws extension
// swapping the server's fragments in.
(function () {
  "use strict";

  function composer() { return document.getElementById("composer"); }
  function input() { return document.getElementById("composer-input"); }
  function transcript() { return document.getElementById("transcript"); }

  var pendingText = null;  // what was sent and not yet confirmed stored by the server
  var stickToBottom = false;

  function nearBottom() {
    var el = document.scrollingElement;
    return el.scrollHeight - el.scrollTop - el.clientHeight < 160;
  }

  function stopButton() { return document.getElementById("stop-button"); }

  function setStreaming(streaming) {
    var stop = stopButton();
    var send = document.getElementById("send-button");
    if (stop) stop.hidden = !streaming;
    if (send) send.hidden = streaming;
    var main = document.getElementById("chat-main");
    if (main) main.setAttribute("aria-busy", streaming ? "true" : "false");
  }

  document.addEventListener("keydown", function (event) {
    var box = input();
    if (event.target === box && event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      var send = document.getElementById("send-button");
      if (box.value.trim() && !(send && send.hidden)) box.form.requestSubmit();
    } else if (event.key === "Escape") {
      if (closePanels() || cancelEditing(event.target)) return;
      var stop = stopButton();
      if (stop && !stop.hidden) document.getElementById("stop-form").requestSubmit();
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing &&
               event.target.closest && event.target.closest(".edit-form")) {
      event.preventDefault();  // Enter sends the edited message too
      if (event.target.value.trim()) event.target.form.requestSubmit();
    }
  });

  document.addEventListener("htmx:wsConfigSend", function (event) {
    var form = event.detail.elt;
    if (form.classList && (form.classList.contains("edit-form") || form.classList.contains("regenerate"))) {
      if (form.classList.contains("edit-form") && !(event.detail.parameters.content || "").trim()) {
        event.preventDefault();
        return;
      }
      setStreaming(true);
    }
    if (event.detail.elt === composer()) {
      var text = event.detail.parameters.content || "";
      if (!text.trim()) { event.preventDefault(); return; }
      pendingText = text;
      setStreaming(true);
    }
  });

  document.addEventListener("htmx:wsBeforeMessage", function () {
    stickToBottom = nearBottom();
  });

  document.addEventListener("htmx:wsAfterMessage", function () {
    var state = document.getElementById("composer-state");
    if (state) {
      if (state.dataset.saved === "1" && pendingText !== null) {
        var box = input();
        // Clear only what was sent: anything typed since stays.
        if (box && box.value === pendingText) box.value = "";
        pendingText = null;
        state.dataset.saved = "0";
      }
      setStreaming(state.dataset.state === "streaming");
      if (state.dataset.state !== "streaming" && state.textContent.trim() && pendingText !== null) {
        pendingText = null;  // refused: the text is still in the box
      }
    }
    if (stickToBottom) window.scrollTo(0, document.scrollingElement.scrollHeight);
  });

  document.addEventListener("htmx:wsClose", function () {
    var note = document.getElementById("connection-state");
    if (note) note.textContent = "Connection lost: reconnecting… (what you typed stays here)";
    setStreaming(false);
  });

  document.addEventListener("htmx:wsOpen", function (event) {
    var note = document.getElementById("connection-state");
    if (note) note.textContent = "";
    // Answers this page shows as being written: the server sends the end of any that ended
    // while the page loaded or the connection was down (the rest stream on into the page).
    var writing = Array.prototype.map.call(
      document.querySelectorAll("article.message.status-streaming"),
      function (article) { return article.dataset.messageId; });
    if (writing.length && event.detail && event.detail.socketWrapper) {
      event.detail.socketWrapper.send(JSON.stringify({ action: "attach", answers: writing }));
    }
  });

  // --- Copy, edit, rename and the feedback panel -------------------------------------------

  function copyText(text, button) {
    var done = function () {
      var label = button.getAttribute("aria-label");
      button.classList.add("copied");
      button.setAttribute("aria-label", "Copied");
      setTimeout(function () {
        button.classList.remove("copied");
        button.setAttribute("aria-label", label);
      }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(text); done(); });
    } else {
      fallbackCopy(text);
      done();
    }
  }

  function fallbackCopy(text) {  // plain http (a LAN address): no Clipboard API there
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.appendChild(area);
    area.select();
    try { document.execCommand("copy"); } catch (e) { /* nothing more to try */ }
    area.remove();
  }

  function closePanels(except) {
    var closed = false;
    document.querySelectorAll(".feedback-panel:not([hidden])").forEach(function (panel) {
      if (panel === except) return;
      // Focus inside the panel (Esc, Close) goes back to the button that opened it.
      var hadFocus = panel.contains(document.activeElement);
      panel.hidden = true;
      var opener = document.querySelector('[aria-controls="' + panel.id + '"]');
      if (opener) opener.setAttribute("aria-expanded", "false");
      if (opener && hadFocus) opener.focus();
      closed = true;
    });
    return closed;
  }

  function setEditing(article, editing) {
    var form = article.querySelector(".edit-form");
    var button = article.querySelector(".edit-message");
    if (!form) return;
    form.hidden = !editing;
    article.classList.toggle("editing", editing);
    if (button) button.setAttribute("aria-expanded", editing ? "true" : "false");
    if (editing) {
      var area = form.querySelector("textarea");
      area.focus();
      area.setSelectionRange(area.value.length, area.value.length);
    }
  }

  function cancelEditing(target) {
    var article = target.closest && target.closest("article.editing");
    if (article) { setEditing(article, false); return true; }
    var rename = document.getElementById("rename-form");
    if (rename && !rename.hidden && target.closest && target.closest("#rename-form")) {
      setRenaming(false);
      return true;
    }
    return false;
  }

  function setRenaming(renaming) {
    var form = document.getElementById("rename-form");
    var line = document.querySelector(".title-line");
    if (!form || !line) return;
    form.hidden = !renaming;
    line.hidden = renaming;
    var start = line.querySelector(".rename-start");
    if (start) start.setAttribute("aria-expanded", renaming ? "true" : "false");
    if (renaming) {
      // The model's title may have come in since the page was drawn: start from the one shown.
      var box = form.querySelector("input[name=title]");
      var shown = line.querySelector(".conversation-title");
      if (shown && shown.dataset.untitled !== "1") box.value = shown.textContent.trim();
      box.select();
    }
  }

  document.addEventListener("click", function (event) {
    var target = event.target.closest ? event.target : event.target.parentElement;
    var hit = function (selector) { return target.closest(selector); };
    var toggle = hit("#sidebar-toggle");
    if (toggle) {
      var layout = document.getElementById("chat-layout");
      var open = layout.classList.toggle("sidebar-open");
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
      return;
    }
    var copy = hit(".copy-code");
    if (copy) {
      var pre = copy.closest(".code-block").querySelector("pre");
      copyText(pre ? pre.innerText : "", copy);
      return;
    }
    copy = hit(".copy-message");
    if (copy) {
      // The text as read, without the code blocks' labels and Copy buttons.
      var content = copy.closest("article").querySelector(".content");
      var heads = content.querySelectorAll(".code-head");
      heads.forEach(function (head) { head.hidden = true; });
      var text = content.innerText.trim();
      heads.forEach(function (head) { head.hidden = false; });
      copyText(text, copy);
      return;
    }
    var edit = hit(".edit-message");
    if (edit) { setEditing(edit.closest("article"), true); return; }
    var cancel = hit(".cancel-edit");
    if (cancel) { setEditing(cancel.closest("article"), false); return; }
    if (hit(".rename-start") || hit(".conversation-title")) { setRenaming(true); return; }
    var more = hit(".more-feedback");
    if (more) {
      var panel = document.getElementById(more.getAttribute("aria-controls"));
      var show = panel.hidden;
      closePanels(panel);
      panel.hidden = !show;
      more.setAttribute("aria-expanded", show ? "true" : "false");
      if (show) { var first = panel.querySelector("button.tag, textarea"); if (first) first.focus(); }
      return;
    }
    if (hit(".close-panel")) { closePanels(); return; }
    if (!hit(".feedback-panel")) closePanels();
  });

  document.addEventListener("DOMContentLoaded", function () {
    var box = input();
    if (box && box.form && box.form.id === "start-form") {
      box.form.addEventListener("submit", function () { box.form.querySelector("button").disabled = true; });
    }
    if (transcript()) window.scrollTo(0, document.scrollingElement.scrollHeight);
    // A page opened while an answer is being written: Stop, not Send, until it ends.
    var state = document.getElementById("composer-state");
    if (state) setStreaming(state.dataset.state === "streaming");
  });
})();
