// The conversation's Export · Share menu and share links. Loaded with the conversation's header,
// each share panel and the list in Settings, so it may run more than once on a page: each run
// closes an open menu (a panel it asked for has arrived), and only the first one listens.
(function () {
  "use strict";

  function closeMenus(except) {
    document.querySelectorAll(".conversation-menu[open]").forEach(function (menu) {
      if (menu !== except) menu.open = false;
    });
  }

  closeMenus();
  if (window.parleySharing) return;
  window.parleySharing = true;

  function copied(button) {
    var text = button.textContent;
    button.textContent = "Copied";
    setTimeout(function () { button.textContent = text; }, 1500);
  }

  function copy(button) {
    var url = button.getAttribute("data-copy");
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(url).then(function () { copied(button); }, function () {});
      return;
    }
    // Plain http (a LAN address) has no Clipboard API: select the field and copy that.
    var field = button.parentElement.querySelector(".share-url");
    if (field) {
      field.select();
      try { document.execCommand("copy"); copied(button); } catch (e) { /* left selected */ }
    }
  }

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (!target.closest) return;
    var menu = target.closest(".conversation-menu");
    // A click outside an open menu closes it; so does a download chosen in it.
    closeMenus(menu && !target.closest(".menu-items a") ? menu : null);
    var button = target.closest(".copy-share-link");
    if (button) copy(button);
  });

  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") closeMenus();
  });
})();
