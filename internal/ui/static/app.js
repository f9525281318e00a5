// Keyboard navigation: j/k select rows of the first list, Enter opens,
// n/p follow the pager, / focuses search, h goes home, ? shows help, and
// on a sample page 1-5 score the focused dimension.
(function () {
  var rows = [], at = -1;
  function list() {
    rows = Array.prototype.slice.call(document.querySelectorAll("table.list tbody tr[data-href]"));
  }
  function select(i) {
    if (!rows.length) return;
    if (at >= 0 && rows[at]) rows[at].classList.remove("sel");
    at = Math.max(0, Math.min(rows.length - 1, i));
    rows[at].classList.add("sel");
    rows[at].scrollIntoView({block: "nearest"});
  }
  function typing(e) {
    var t = e.target.tagName;
    return t === "INPUT" && e.target.type !== "radio" || t === "TEXTAREA" || t === "SELECT";
  }
  document.addEventListener("DOMContentLoaded", function () {
    list();
    rows.forEach(function (r) {
      r.addEventListener("dblclick", function () { location.href = r.dataset.href; });
    });
  });
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e)) return;
    var link;
    switch (e.key) {
    case "j": select(at + 1); break;
    case "k": select(at - 1); break;
    case "Enter": if (at >= 0 && rows[at]) location.href = rows[at].dataset.href; else return; break;
    case "n": link = document.querySelector("a[rel=next]"); if (link) location.href = link.href; break;
    case "p": link = document.querySelector("a[rel=prev]"); if (link) location.href = link.href; break;
    case "h": location.href = "/"; break;
    case "/": var s = document.getElementById("search"); if (s) s.focus(); break;
    case "?": var h = document.getElementById("help"); h.hidden = !h.hidden; break;
    default:
      if (/^[1-5]$/.test(e.key) && document.activeElement && document.activeElement.name) {
        var r = document.querySelector("input[type=radio][name='" + document.activeElement.name + "'][value='" + e.key + "']");
        if (r) { r.checked = true; r.focus(); }
      }
      return;
    }
    e.preventDefault();
  });
})();
