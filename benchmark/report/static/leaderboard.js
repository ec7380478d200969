/* Leaderboard: sortable columns, row filters, plot tabs. Plain JavaScript, no network. */
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  /* ---- sorting: numbers by value, text by locale; NaN always last ---- */
  function sortKey(td, numeric) {
    var s = td.getAttribute("data-sort");
    if (s === null) s = td.textContent.trim();
    return numeric ? parseFloat(s) : s;
  }

  function sortTable(table, col, numeric, ascending) {
    var tbody = table.tBodies[0];
    var items = Array.prototype.map.call(tbody.rows, function (tr, i) {
      return { tr: tr, key: sortKey(tr.cells[col], numeric), i: i };
    });
    items.sort(function (a, b) {
      var an = numeric && isNaN(a.key), bn = numeric && isNaN(b.key);
      if (an || bn) return an === bn ? a.i - b.i : (an ? 1 : -1);
      var c = numeric ? a.key - b.key : a.key.localeCompare(b.key);
      return (ascending ? c : -c) || a.i - b.i;
    });
    items.forEach(function (it) { tbody.appendChild(it.tr); });
  }

  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("table.results th button.sort");
    if (!btn) return;
    var th = btn.parentElement, table = th.closest("table");
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("thead th").forEach(function (h) { h.setAttribute("aria-sort", "none"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    sortTable(table, parseInt(btn.dataset.col, 10), btn.dataset.num === "1", ascending);
    var metric = th.dataset.metric, body = table.closest(".split-body");
    if (metric && body) showPlot(body.querySelector(".plots"), metric);
  });

  /* ---- filters: one form per suite, applied to every table of the suite ----
     "~preferred": the configured fit/confidence where the method has it (data-*-pref). */
  var PREFERRED = "~preferred";
  function applyFilters(form) {
    var el = function (n) { return form.elements.namedItem(n); };
    var want = { base: el("base").value, family: el("family").value, fit: el("fit").value, confidence: el("confidence").value };
    var bmin = parseFloat(el("bmin").value), bmax = parseFloat(el("bmax").value);
    var ranged = !isNaN(bmin) || !isNaN(bmax), keepNone = el("nobalance").checked;
    var suite = form.closest("section.suite");
    suite.classList.toggle("show-ci", el("ci").checked);
    suite.querySelectorAll("details.split").forEach(function (det) {
      var table = det.querySelector("table.results"), shown = 0, total = 0;
      Array.prototype.forEach.call(table.tBodies[0].rows, function (tr) {
        var d = tr.dataset, ok = true;
        for (var k in want) {
          if (!want[k]) continue;
          if (want[k] === PREFERRED ? d[k + "Pref"] !== "1" : d[k] !== want[k]) ok = false;
        }
        if (ok && ranged) {
          var b = parseFloat(d.balance);
          ok = isNaN(b) ? keepNone : (isNaN(bmin) || b >= bmin) && (isNaN(bmax) || b <= bmax);
        }
        tr.hidden = !ok;
        total += 1;
        if (ok) shown += 1;
      });
      det.querySelector(".count").textContent = shown === total ? total + " rows" : shown + " of " + total + " rows";
      det.querySelector(".no-match").hidden = shown > 0;
    });
  }

  document.querySelectorAll("form.filters").forEach(function (form) {
    form.addEventListener("input", function () { applyFilters(form); });
    form.addEventListener("change", function () { applyFilters(form); });
    form.addEventListener("reset", function () { setTimeout(function () { applyFilters(form); }, 0); });
    applyFilters(form);
  });

  /* ---- plot tabs: one metric at a time beside the table ---- */
  function showPlot(panel, metric) {
    if (!panel || !panel.querySelector('.plot-set[data-metric="' + CSS.escape(metric) + '"]')) return;
    panel.querySelectorAll(".plot-tabs button").forEach(function (b) {
      b.setAttribute("aria-selected", b.dataset.metric === metric ? "true" : "false");
    });
    panel.querySelectorAll(".plot-set").forEach(function (s) { s.hidden = s.dataset.metric !== metric; });
  }

  document.querySelectorAll(".plots").forEach(function (panel) {
    var first = panel.querySelector(".plot-tabs button");
    if (first) showPlot(panel, first.dataset.metric);
    panel.addEventListener("click", function (ev) {
      var b = ev.target.closest(".plot-tabs button");
      if (b) showPlot(panel, b.dataset.metric);
    });
  });

  /* ---- links into closed <details>: open them ---- */
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    for (var el = id && document.getElementById(id); el; el = el.parentElement) {
      if (el.tagName === "DETAILS") el.open = true;
    }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
})();
