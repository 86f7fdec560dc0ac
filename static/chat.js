// Parley chat page: keyboard sending, the Send/Stop state, and never losing a typed message.
// Streaming itself is htmx's ws extension swapping the server's fragments in.
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

  function setStreaming(streaming) {
    var stop = document.getElementById("stop-form");
    var send = document.getElementById("send-button");
    if (stop) stop.hidden = !streaming;
    if (send) send.disabled = streaming;
    var main = document.getElementById("chat-main");
    if (main) main.setAttribute("aria-busy", streaming ? "true" : "false");
  }

  document.addEventListener("keydown", function (event) {
    var box = input();
    if (event.target === box && event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      var send = document.getElementById("send-button");
      if (box.value.trim() && !(send && send.disabled)) box.form.requestSubmit();
    } else if (event.key === "Escape") {
      var stop = document.getElementById("stop-form");
      if (stop && !stop.hidden) stop.requestSubmit();
    }
  });

  document.addEventListener("htmx:wsConfigSend", function (event) {
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

  document.addEventListener("htmx:wsOpen", function () {
    var note = document.getElementById("connection-state");
    if (note) note.textContent = "";
  });

  document.addEventListener("click", function (event) {
    var toggle = event.target.closest && event.target.closest("#sidebar-toggle");
    if (!toggle) return;
    var layout = document.getElementById("chat-layout");
    var open = layout.classList.toggle("sidebar-open");
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
  });

  document.addEventListener("DOMContentLoaded", function () {
    var box = input();
    if (box && box.form && box.form.id === "start-form") {
      box.form.addEventListener("submit", function () { box.form.querySelector("button").disabled = true; });
    }
    if (transcript()) window.scrollTo(0, document.scrollingElement.scrollHeight);
  });
})();
