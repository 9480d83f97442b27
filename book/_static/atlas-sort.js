// Sortable leaderboards: click a column header to sort by it (again to reverse). Cells are compared by
// their leading number ("0.912 [0.880, 0.940]" sorts by 0.912); cells without a number sort last.
// No dependencies, no network.
(function () {
  function key(cell) {
    var m = (cell.textContent || "").trim().match(/^-?\d+(\.\d+)?/);
    return m ? parseFloat(m[0]) : null;
  }
  function sortBy(table, col, th) {
    var body = table.tBodies[0];
    if (!body) return;
    var rows = Array.prototype.slice.call(body.rows);
    var desc = th.getAttribute("aria-sort") !== "descending";
    rows.sort(function (a, b) {
      var x = key(a.cells[col]), y = key(b.cells[col]);
      if (x === null && y === null) return a.cells[col].textContent.localeCompare(b.cells[col].textContent);
      if (x === null) return 1;
      if (y === null) return -1;
      return desc ? y - x : x - y;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(th.parentNode.cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", desc ? "descending" : "ascending");
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".atlas-leaderboard table").forEach(function (table) {
      var head = table.tHead && table.tHead.rows[0];
      if (!head) return;
      Array.prototype.forEach.call(head.cells, function (th, col) {
        th.classList.add("atlas-sortable");
        th.title = "sort by this column";
        th.addEventListener("click", function () { sortBy(table, col, th); });
      });
    });
  });
})();
