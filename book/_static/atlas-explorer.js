// Item explorer glue: the one-click filters of an explorer page and the filters a link carries in its query
// string (?right=RUN&wrong=RUN&hard=1&disputed=1&slice=NAME&group=GROUP&q=TEXT), applied to the itables
// DataTable as fixed column searches (exact cell values), beside the table's own search, sorting and column
// filters. The table itself is itables' (DataTables); nothing here draws a table. No network.
(function () {
  "use strict";
  var SEP = "\u241f";

  function exact(value) {
    return function (cell) { return cell === value; };
  }

  function setup(root, cfg, $) {
    var table = document.getElementById(cfg.table);
    var form = root.querySelector(".atlas-explorer-filters");
    var status = root.querySelector(".atlas-explorer-status");
    var dt = null;

    function params() { return new URLSearchParams(window.location.search); }

    function apply(p, record) {
      var t0 = performance.now();
      var notes = [];
      dt.columns().every(function () { this.search.fixed("atlas", null); });
      var conds = [];
      p.getAll("right").forEach(function (r) { conds.push([cfg.right[r], cfg.verdicts[0], r]); });
      p.getAll("wrong").forEach(function (r) { conds.push([cfg.right[r], cfg.verdicts[1], r]); });
      if (p.get("hard")) conds.push([cfg.hard, "yes", "every run wrong"]);
      if (p.get("disputed")) conds.push([cfg.disputed, "yes", "runs disagree"]);
      if (p.get("slice")) conds.push([cfg.slices[p.get("slice")], p.get("group") || "", p.get("slice")]);
      conds.forEach(function (c) {
        if (c[0] === undefined) { notes.push("no column " + c[2] + " on this page"); return; }
        dt.column(c[0]).search.fixed("atlas", exact(c[1]));
      });
      dt.search(p.get("q") || "");
      dt.draw();
      var n = dt.rows({ search: "applied" }).count();
      var ms = performance.now() - t0;
      if (record) root.dataset.filterMs = ms.toFixed(1);
      root.dataset.rows = String(n);
      var what = [];
      p.getAll("right").forEach(function (r) { what.push(r + " " + cfg.verdicts[0]); });
      p.getAll("wrong").forEach(function (r) { what.push(r + " " + cfg.verdicts[1]); });
      if (p.get("hard")) what.push(cfg.verdicts[1] + " for every run");
      if (p.get("disputed")) what.push("runs disagree");
      if (p.get("slice")) what.push(p.get("slice") + ": " + (p.get("group") || ""));
      if (p.get("q")) what.push("search \u201c" + p.get("q") + "\u201d");
      if (status) {
        status.textContent = (what.length ? what.join(", ") + ": " : "") + n.toLocaleString("en") + " of " +
          dt.rows().count().toLocaleString("en") + " rows" + (notes.length ? " (" + notes.join("; ") + ")" : "");
      }
    }

    function go(p) {
      var url = window.location.pathname + (p.toString() ? "?" + p.toString() : "") + window.location.hash;
      window.history.replaceState(null, "", url);
      apply(p, true);
    }

    function start(api) {
      dt = api;
      dt.on("draw", function () { root.dataset.rows = String(dt.rows({ search: "applied" }).count()); });
      root.dataset.firstDrawMs = performance.now().toFixed(1);
      apply(params(), false);
      root.dataset.ready = "1";
      if (!form) return;
      var pa = params();
      var a = form.querySelector("select[name=a]"), b = form.querySelector("select[name=b]");
      if (a && pa.get("right") && cfg.right[pa.get("right")] !== undefined) a.value = pa.get("right");
      if (b && pa.get("wrong") && cfg.right[pa.get("wrong")] !== undefined) b.value = pa.get("wrong");
      form.addEventListener("click", function (ev) {
        var kind = ev.target && ev.target.getAttribute && ev.target.getAttribute("data-filter");
        if (!kind) return;
        var p = new URLSearchParams();
        if (kind === "pair") { p.append("right", a.value); p.append("wrong", b.value); }
        else if (kind === "errors") { p.append("wrong", a.value); }
        else if (kind === "hard") { p.set("hard", "1"); }
        else if (kind === "disputed") { p.set("disputed", "1"); }
        go(p);
      });
      var sl = form.querySelector("select[name=slice]");
      if (sl) {
        sl.addEventListener("change", function () {
          var p = new URLSearchParams();
          if (sl.value) { var kv = sl.value.split(SEP); p.set("slice", kv[0]); p.set("group", kv[1]); }
          go(p);
        });
      }
    }

    if ($.fn.dataTable.isDataTable(table)) { start($(table).DataTable()); return; }
    $(table).on("init.dt", function (e, settings) {
      if (settings.nTable === table && dt === null) start(new $.fn.dataTable.Api(settings));
    });
  }

  function main() {
    document.querySelectorAll(".atlas-explorer").forEach(function (root) {
      var el = root.querySelector("script.atlas-explorer-config");
      if (!el) return;
      var cfg = JSON.parse(el.textContent);
      var ready = window[cfg.module];
      if (ready) ready.then(function (mod) { setup(root, cfg, mod.jQuery); });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
  else main();
})();
