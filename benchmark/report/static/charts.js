/* Pareto charts: one per suite, drawn by plotly.js from the same split data files as the tables.

   The chart sits at the top of the page, beside the summary sentences (340 px tall there; a phone: 540 px, the
   legend under it). The reader picks the split, the metric and
   the x axis (total GFLOPs, FLOPs balance, trainable parameters); the suite's full-table filters (base, family, fit,
   confidence, balance range, intervals; panel.dataset.filters names the form) apply.
   One trace per method family (a legend click hides or shows it; first in the legend, which scrolls in a short
   chart), the Pareto frontier of each base (its own legend items) and, against a cost, the frontier over every
   method. plotly.js comes from the report's or site's assets/ (loaded after the headline); nothing comes from a
   network.
   Every name from the data is HTML-escaped before plotly sees it (plotly renders a few tags in
   labels), so a name is always shown as text. */
(function () {
  "use strict";
  var UQ = window.UQ, panels = document.querySelectorAll(".chart-panel");
  if (!UQ || !panels.length) return;
  var META = JSON.parse(document.getElementById("uq-charts").textContent);
  var CELLS = UQ.CELLS;
  var FAMILY_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                       "#bcbd22", "#17becf"];
  var SYMBOLS = ["circle", "square", "diamond", "triangle-up", "triangle-down", "cross", "x", "pentagon", "hexagon",
                 "triangle-left", "triangle-right", "hourglass", "bowtie", "star-square", "star-diamond"];
  var X_AXES = {
    gflops: { title: "total GFLOPs per image", short: "GFLOPs" },
    balance: { title: "FLOPs balance = GFLOPs(sidekick) / GFLOPs(base)", short: "FLOPs balance" },
    overhead: { title: "trainable parameters, % of the pretrained backbone", short: "trainable %" }
  };

  function esc(s) {
    return String(s === null || s === undefined ? "" : s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  function fmt(v, digits) { return v === null || v === undefined || isNaN(v) ? "\u2014" : String(parseFloat(v.toPrecision(digits))); }

  /* ---- plotly.js (assets/): loaded once the headline is on screen, so it never delays it; the first
     table's data file loads alongside ---- */
  var plotlyWaiting = [], plotlyFailed = false;
  function loadPlotly() {
    var tag = document.createElement("script");
    tag.src = META.plotly;
    tag.addEventListener("load", function () {
      if (window.performance && performance.mark) performance.mark("uq-plotly");
      plotlyWaiting.splice(0).forEach(function (w) { w[0](); });
    });
    tag.addEventListener("error", function () { plotlyFailed = true; plotlyWaiting.splice(0).forEach(function (w) { w[1](); }); });
    document.head.appendChild(tag);
  }
  function withPlotly(then, failed) {
    if (window.Plotly) return then();
    if (plotlyFailed) return failed();
    plotlyWaiting.push([then, failed]);
  }

  /* ---- Pareto frontier: as benchmark.core.pareto.pareto_front (lower cost and a better value dominate) ---- */
  function frontier(points, hib) {
    var order = points.map(function (_, i) { return i; }).filter(function (i) { return !isNaN(points[i].y); });
    var v = function (i) { return hib ? points[i].y : -points[i].y; };
    order.sort(function (a, b) { return points[a].x - points[b].x || v(b) - v(a) || a - b; });
    var on = [], best = -Infinity, runBeats = false;
    order.forEach(function (i, k) {
      var prev = k ? order[k - 1] : null;
      var sameRun = prev !== null && points[prev].x === points[i].x && v(prev) === v(i);
      if (!sameRun) runBeats = k === 0 || v(i) > best;
      if (runBeats) on.push(i);
      best = Math.max(best, v(i));
    });
    return on.map(function (i) { return points[i]; });
  }

  /* ---- far outliers (as benchmark.report.plotaxes.outliers): the initial axes leave them out ---- */
  function quantile(sorted, q) {
    var pos = (sorted.length - 1) * q, lo = Math.floor(pos), hi = Math.ceil(pos);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
  }
  function farOutliers(vals) {
    var none = vals.map(function () { return false; });
    var sorted = vals.slice().sort(function (a, b) { return a - b; });
    if (sorted.length < 4) return none;
    var q1 = quantile(sorted, 0.25), q3 = quantile(sorted, 0.75), iqr = q3 - q1;
    if (iqr <= 0) return none;
    var out = vals.map(function (v) { return v < q1 - 3 * iqr || v > q3 + 3 * iqr; });
    var rest = vals.filter(function (_, i) { return !out[i]; });
    var lo = Math.min.apply(null, rest), hi = Math.max.apply(null, rest), span = Math.max(hi - lo, 1e-12);
    out = out.map(function (o, i) { return o && (vals[i] > hi ? vals[i] - hi : lo - vals[i]) > 0.5 * span; });
    return out.filter(Boolean).length > vals.length / 3 ? none : out;
  }
  /* [lo, hi] of the values (log10 on a log axis) with a margin: what plotly's axis range wants */
  function padded(values, log, pad) {
    var t = values.filter(function (v) { return v !== null && v !== undefined && !isNaN(v) && (!log || v > 0); })
                  .map(function (v) { return log ? Math.log10(v) : v; });
    var lo = Math.min.apply(null, t), hi = Math.max.apply(null, t);
    var span = hi > lo ? hi - lo : Math.max(Math.abs(hi), 1e-3) * 0.1;
    return [lo - pad * span, hi + pad * span];
  }
  function decades(values) {
    if (!values.length) return false;
    var lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    return lo > 0 && hi / lo >= 10;
  }

  function columnIndex(data, key) {
    for (var i = 0; i < data.columns.length; i++) if (data.columns[i].key === key) return i;
    return -1;
  }

  /* ---- the points of one chart ---- */
  function chartPoints(data, metricCol, xKind, sel) {
    var s = data.s, gi = columnIndex(data, "gflops"), oi = columnIndex(data, "overhead_percent"), mi = columnIndex(data, "method");
    var pts = [];
    data.rows.forEach(function (row) {
      if (!UQ.passes(data, row, sel.want, sel.range)) return;
      var v = row[CELLS + metricCol];
      if (!v || v[0] === null) return;
      var fam = s[row[1]], x;
      if (xKind === "gflops") x = gi >= 0 ? row[CELLS + gi] : null;
      else if (xKind === "overhead") x = oi >= 0 ? row[CELLS + oi] : null;
      else x = row[5] !== null ? row[5] : (fam === META.reference ? 0 : null);
      if (x === null || x === undefined || isNaN(x) || (xKind === "balance" ? x < 0 : x <= 0)) return;
      pts.push({ x: x, y: v[0], lo: v[1], hi: v[2], family: fam, base: s[row[0]], sidekick: s[row[8]],
                 method: mi >= 0 ? s[row[CELLS + mi]] : fam, members: row[7].map(function (k) { return s[k]; }),
                 balance: row[5], gflops: gi >= 0 ? row[CELLS + gi] : null, fit: s[row[2]], confidence: s[row[3]] });
    });
    if (xKind === "balance") {  // the base alone (at 0) only next to its duos
      var withDuos = {};
      pts.forEach(function (p) { if (p.balance !== null) withDuos[p.base] = true; });
      pts = pts.filter(function (p) { return p.balance !== null || withDuos[p.base]; });
    }
    return pts;
  }

  function hoverText(p, metric) {
    var lines = ["<b>" + esc(p.method) + "</b>", "base: " + esc(p.base)];
    if (p.sidekick) lines.push("sidekick: " + esc(p.sidekick));
    else if (p.members.length > 1) lines.push("members: " + esc(p.members.join(" + ")));
    lines.push("FLOPs balance: " + fmt(p.balance, 4), "GFLOPs: " + fmt(p.gflops, 4));
    var ci = p.lo !== null && p.hi !== null ? " [" + UQ.fmtMetric(p.lo) + ", " + UQ.fmtMetric(p.hi) + "]" : "";
    lines.push(esc(metric.label) + ": " + UQ.fmtMetric(p.y) + ci);
    lines.push("fit / confidence: " + esc(p.fit) + " / " + esc(p.confidence));
    return lines.join("<br>");
  }

  function hsl(i, n) { return "hsl(" + Math.round(360 * i / Math.max(n, 1)) + ", 60%, 42%)"; }

  function traces(pts, metric, xKind, showCi) {
    var hib = metric.hib, out = [];
    var families = Array.from(new Set(pts.map(function (p) { return p.family; }))).sort();
    var methods = Array.from(new Set(pts.map(function (p) { return p.method; }))).sort();
    var bases = Array.from(new Set(pts.map(function (p) { return p.base; }))).sort();
    bases.forEach(function (b, i) {
      var f = frontier(pts.filter(function (p) { return p.base === b; }), hib);
      if (f.length < 2) return;
      out.push({ type: "scatter", mode: "lines", x: f.map(function (p) { return p.x; }), y: f.map(function (p) { return p.y; }),
                 line: { shape: "hv", width: 1.4, color: hsl(i, bases.length) }, opacity: 0.8, hoverinfo: "skip",
                 name: esc(b), legendgroup: "frontiers", legendgrouptitle: { text: "Pareto frontier per base" }, legendrank: 1000,
                 meta: { kind: "frontier", base: b } });
    });
    if (xKind !== "balance") {
      var all = frontier(pts, hib);
      out.push({ type: "scatter", mode: "lines", x: all.map(function (p) { return p.x; }), y: all.map(function (p) { return p.y; }),
                 line: { shape: "hv", width: 2, dash: "dash", color: "#222" }, hoverinfo: "skip",
                 name: "every method", legendgroup: "frontier-all", legendgrouptitle: { text: "Pareto frontier" }, legendrank: 900,
                 meta: { kind: "frontier-all" } });
    }
    families.forEach(function (fam, i) {
      var ps = pts.filter(function (p) { return p.family === fam; }), ref = fam === META.reference;
      var t = { type: "scatter", mode: "markers", x: ps.map(function (p) { return p.x; }), y: ps.map(function (p) { return p.y; }),
                name: esc(fam), legendgroup: "family-" + i, legendrank: 1 + i, hoverinfo: "text", hoverlabel: { align: "left" },
                hovertext: ps.map(function (p) { return hoverText(p, metric); }),
                marker: { color: FAMILY_COLORS[i % FAMILY_COLORS.length], size: ref ? 13 : 8, opacity: 0.85,
                          line: { width: ref ? 1 : 0.5, color: ref ? "#000" : "#fff" },
                          symbol: ps.map(function (p) { return ref ? "star" : SYMBOLS[methods.indexOf(p.method) % SYMBOLS.length]; }) },
                meta: { kind: "family", family: fam, points: ps.map(function (p) { return [p.base, p.sidekick, p.method]; }) } };
      if (showCi) {
        t.error_y = { type: "data", symmetric: false, thickness: 1, width: 0, color: "rgba(60,60,60,0.35)",
                      array: ps.map(function (p) { return p.hi === null ? 0 : Math.max(p.hi - p.y, 0); }),
                      arrayminus: ps.map(function (p) { return p.lo === null ? 0 : Math.max(p.y - p.lo, 0); }) };
      }
      out.push(t);
    });
    return out;
  }

  function Panel(panel) {
    var filters = document.getElementById(panel.dataset.filters);  // the suite's full-table filters apply to its chart
    var form = panel.querySelector("form.chart-controls"), gd = panel.querySelector(".chart");
    var note = panel.querySelector(".chart-note"), token = 0;
    var f = function (n) { return form.elements.namedItem(n); };

    function say(text) { note.textContent = text; note.hidden = !text; }

    function fillMetrics(data) {
      var sel = f("metric"), want = sel.value || panel.dataset.metric, keys = [];
      sel.replaceChildren();
      data.columns.forEach(function (c) {
        if (!c.metric) return;
        var o = document.createElement("option");
        o.value = c.key; o.textContent = (META.metrics[c.key] || [c.label])[0];
        sel.appendChild(o); keys.push(c.key);
      });
      sel.value = keys.indexOf(want) >= 0 ? want : (keys[0] || "");
    }

    function fillAxes(data) {
      var oi = columnIndex(data, "overhead_percent"), sel = f("x");
      var hasOverhead = oi >= 0 && data.rows.some(function (r) { return r[CELLS + oi] !== null && r[CELLS + oi] > 0; });
      var hasBalance = data.rows.some(function (r) { return r[5] !== null; });
      Array.prototype.forEach.call(sel.options, function (o) {
        o.disabled = (o.value === "overhead" && !hasOverhead) || (o.value === "balance" && !hasBalance);
      });
      if (sel.selectedOptions[0].disabled) sel.value = "gflops";
    }

    function plot(data, mine) {
      if (mine !== token) return;
      fillMetrics(data);
      fillAxes(data);
      var key = f("metric").value, xKind = f("x").value, sel = UQ.selection(filters);
      var mcol = columnIndex(data, key), info = META.metrics[key] || [key, null];
      var metric = { key: key, label: info[0], hib: info[1] !== false };
      var pts = mcol >= 0 ? chartPoints(data, mcol, xKind, sel) : [];
      var out = farOutliers(pts.map(function (p) { return p.y; }));
      var shown = pts.filter(function (_, i) { return !out[i]; }), hidden = pts.length - shown.length;
      var xs = shown.map(function (p) { return p.x; }), ys = shown.map(function (p) { return p.y; });
      var xlog = xKind !== "balance" && decades(xs), ylog = decades(ys);
      var better = info[1] === null ? "" : (info[1] ? " (higher is better)" : " (lower is better)");
      var layout = {
        margin: { l: 64, r: 8, t: 8, b: 48 }, hovermode: "closest", height: gd.clientHeight || 420,
        uirevision: [f("split").value, key, xKind].join("|"),
        xaxis: { title: { text: X_AXES[xKind].title + (xlog ? " (log scale)" : "") }, type: xlog ? "log" : "linear",
                 zeroline: false },
        yaxis: { title: { text: esc(metric.label) + better + (ylog ? ", log scale" : "") }, type: ylog ? "log" : "linear",
                 zeroline: false },
        legend: { groupclick: "toggleitem", font: { size: 11 } }
      };
      if (gd.clientWidth < 520) {  // a phone: the legend under the axes, the plot keeps the width
        layout.legend.orientation = "h"; layout.legend.y = -0.32; layout.legend.yanchor = "top";
        layout.margin = { l: 52, r: 6, t: 6, b: 40 };
      }
      if (hidden) {  // the axes cover the other points; double-click (autoscale) shows all
        var bounds = sel.ci ? shown.map(function (p) { return p.lo; }).concat(shown.map(function (p) { return p.hi; })) : [];
        layout.yaxis.range = padded(ys.concat(bounds), ylog, 0.08);
        layout.xaxis.range = padded(xs, xlog, 0.05);
      }
      var config = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["select2d", "lasso2d"],
                     toImageButtonOptions: { format: "svg", filename: "pareto" } };
      var first = !performance.getEntriesByName("uq-chart").length;
      if (first && performance.mark) performance.mark("uq-chart-start");
      window.Plotly.react(gd, traces(pts, metric, xKind, sel.ci), layout, config).then(function () {
        if (mine !== token) return;
        gd.dataset.split = f("split").value; gd.dataset.metric = key; gd.dataset.x = xKind;
        gd.dataset.points = String(pts.length); gd.dataset.ready = "1";
        if (first && performance.mark) performance.mark("uq-chart");
      });
      say(!pts.length ? "No point to draw: no row of this split passes the filters with this metric and x axis."
          : hidden ? hidden + " point(s) far outside the others are beyond the y range: double-click the chart to show all." : "");
    }

    function draw() {
      var mine = ++token, opt = f("split").selectedOptions[0];
      if (!opt) return;
      UQ.load(opt.value, opt.dataset.file, function (data) {
        withPlotly(function () { plot(data, mine); }, function () { say("Could not load " + META.plotly + ": the charts need it."); });
      }, function () { say("Could not load " + opt.dataset.file + "."); });
    }

    form.addEventListener("change", draw);
    var timer = null;
    var later = function () { clearTimeout(timer); timer = setTimeout(draw, 60); };
    filters.addEventListener("input", later);
    filters.addEventListener("change", later);
    filters.addEventListener("reset", later);
    draw();
  }

  loadPlotly();
  panels.forEach(function (p) { new Panel(p); });
})();
