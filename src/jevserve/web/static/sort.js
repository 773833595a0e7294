// Sort the board's rows in place when a column header is clicked (or activated with Enter).
// Without this script the header links re-render the page sorted on the server, so the table reads the same.
(function () {
  var table = document.getElementById("board");
  if (!table) return;
  table.querySelectorAll("th[data-col]").forEach(function (th) {
    var link = th.querySelector("a");
    var target = link || th;
    target.addEventListener("click", function (event) {
      event.preventDefault();
      var col = +th.dataset.col, desc = th.getAttribute("aria-sort") !== "descending";
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (x, y) {
        var a = x.cells[col].dataset.v, b = y.cells[col].dataset.v;
        var na = parseFloat(a), nb = parseFloat(b);
        if (isNaN(na) && isNaN(nb)) return desc ? String(b).localeCompare(a) : String(a).localeCompare(b);
        if (isNaN(na)) return 1;
        if (isNaN(nb)) return -1;
        // a category average over fewer of its tasks comes after the complete ones, in either direction
        var pa = x.cells[col].dataset.partial ? 1 : 0, pb = y.cells[col].dataset.partial ? 1 : 0;
        if (pa !== pb) return pa - pb;
        return desc ? nb - na : na - nb;
      });
      rows.forEach(function (r) { body.appendChild(r); });
      table.querySelectorAll("th[data-col]").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", desc ? "descending" : "ascending");
    });
  });
})();
