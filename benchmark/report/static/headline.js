/* The headline table: per base model of the chosen split, the base alone, its duos and the other methods built on it,
   ranked by the chosen metric (or in a fixed order where the split is noise-dominated), its columns chosen by the
   reader; and the training-seed spread. Data: the page's uq-headline JSON (benchmark.report.headline.compact), read
   by leaderboard.js (window.UQ.head), which runs first; it holds each suite's first split, and {name, file} for the
   others, whose data file is loaded when a reader chooses one (benchmark.report.pagedata.defer_headline_splits). */
(function () {
  "use strict";
  var UQ = window.UQ, head = UQ.head, el = UQ.el, fmtMetric = UQ.fmtMetric, fmtDiff = UQ.fmtDiff, fmtCost = UQ.fmtCost;
  var sortText = UQ.sortText, membersCell = UQ.membersCell;
  var hform = document.querySelector("form.headline-controls");
  var hf = function (n) { return hform.elements.namedItem(n); };

  function option(sel, value, text) {
    var o = el("option", "", text);
    o.value = value;
    sel.appendChild(o);
  }
  head.suites.forEach(function (s, i) { option(hf("suite"), i, s.name); });

  function fillSplits() {
    var suite = head.suites[hf("suite").value], sel = hf("split");
    sel.replaceChildren();
    if (!suite) return;
    suite.splits.forEach(function (sp, i) { option(sel, i, sp.name); });
  }

  var SOURCE = { 8: "own", 16: "fallback" };
  function seedSource(v) { return SOURCE[v[4] & 24] || "none"; }
  function seedText(v) {
    var src = seedSource(v);
    if (src === "none") return "no training-seed spread measured for this difference";
    return "seed sd of this kind of difference " + fmtMetric(v[5]) + (src === "own"
      ? " (over the " + v[6] + " seeds of its seed group)"
      : " (fallback: the largest such spread of this split and metric, " + v[6] + " seeds)");
  }

  function metricCell(i, e, primary, withCi) {
    var v = e.m[i], td = el("td", "num" + (primary ? " primary" : ""));
    td.dataset.sort = sortText(v[0]);
    td.appendChild(el("span", "v", fmtMetric(v[0])));
    if (e.k !== "alone" && v[1] !== null) {
      var d = el("span", "d", "\u0394 " + fmtDiff(v[1]));
      if (withCi && v[2] !== null && v[3] !== null) d.appendChild(el("span", "dci", " [" + fmtDiff(v[2]) + ", " + fmtDiff(v[3]) + "]"));
      var within = (v[4] & 4) !== 0, known = (v[4] & 24) !== 0;
      if (v[4] & 3) {
        var sig = v[4] & 1 ? "better" : "worse", finding = known && !within;
        var mark = el("span", "mark " + sig + (finding ? " finding" : " not-finding"), sig === "better" ? "\u25B2" : "\u25BC");
        mark.title = "the paired-bootstrap interval of \u0394 excludes 0: " + sig + " than the base alone" + (finding
          ? "; outside the training-seed noise: a finding"
          : within ? "; but |\u0394| is within the training-seed noise: not a finding" : "; training-seed noise unmeasured");
        d.appendChild(mark);
      }
      if (within) {
        var w = el("span", "mark seed", "\u2248");
        w.title = "within training-seed noise: |\u0394| \u2264 " + head.factor + " \u00D7 " + seedText(v);
        d.appendChild(w);
        td.classList.add("within-noise");
      }
      td.title = seedText(v);
      td.appendChild(d);
    }
    return td;
  }

  function noiseNote(split, i, label) {
    var note = document.querySelector(".noise-note"), v = split && split.noise ? split.noise[i] : null;
    var dominated = !!(v && v[2]);
    note.hidden = !dominated;
    if (dominated) {
      note.replaceChildren(el("strong", "", "Not ranked: typical differences on this split are within the training-seed spread."),
        document.createTextNode(" " + label + ": median |\u0394| " + fmtMetric(v[1]) + " < " + head.factor + " \u00D7 " +
          fmtMetric(v[0]) + ", the largest seed spread of a model alone; rows by base."));
    }
    return dominated;
  }

  /* a page merged from several sources (the site: bundles): where each headline row comes from */
  var SOURCES = head.sources || null;
  function sourceCell(src, cf) {
    var td = el("td", "t source");
    (src ? src.split(" ") : []).forEach(function (id, i) {
      var info = SOURCES[id] || {};
      if (i) td.appendChild(document.createTextNode(" + "));
      var a = el("a", "", id);
      if (info.link) a.href = info.link;
      td.appendChild(a);
      td.appendChild(document.createTextNode(" "));
      td.appendChild(el("span", "badge " + (info.status === "verified" ? "verified" : "self-reported"), info.status || "?"));
      td.appendChild(el("span", "who", " " + (info.contributor || "")));
    });
    if (cf) {
      var w = el("span", "mark conflict", " \u26A0");
      w.title = "another bundle of the same status gives other values for this row: " + cf.split(" ").join(", ");
      td.appendChild(w);
      td.classList.add("conflict");
    }
    return td;
  }

  /* the headline's columns: the row (rank and role, a row header), the ranked metric, then those ticked in its
     column chooser (name=col) in this order */
  var HEAD_COLS = [
    { key: "method", label: "Method", cls: "text" }, { key: "models", label: "Models", cls: "text" },
    { key: "gflops", label: "GFLOPs", cls: "num" },
    { key: "ti", label: "Train img", cls: "num", title: "training budget: training images processed to make the row's " +
      "models (epochs x images x members), summed over every training run behind it, the fine-tunes it builds on included" },
    { key: "tp", label: "Trained params", cls: "num", title: "training budget: parameters trained, summed over the training runs behind the row" },
    { key: "seed", label: "Seed noise", cls: "text" }
  ];
  function headChosen() {
    var on = {};
    hform.querySelectorAll("input[name=col]").forEach(function (b) { on[b.value] = b.checked; b.disabled = b.value === hf("metric").value; });
    return on;
  }

  var empty = document.querySelector(".headline-empty"), EMPTY = empty.textContent;
  function showFigs(suite, split) {
    var key = suite && split ? suite.name + "/" + split.name : "";
    document.querySelectorAll(".headline-figs").forEach(function (d) { d.hidden = d.dataset.key !== key; });
  }
  /* a split after its suite's first: its data file, loaded once (leaderboard.js: UQ.load), then drawn if still chosen */
  function loadSplit(suite, split) {
    showFigs(suite, split);
    document.getElementById("headline-table").tBodies[0].replaceChildren();
    document.querySelector(".noise-note").hidden = true;
    renderSpread(null);
    empty.textContent = "Loading the headline of " + split.name + "\u2026";
    empty.hidden = false;
    UQ.load("headline:" + suite.name + "/" + split.name, split.file, function (data) {
      Object.assign(split, data);
      renderHeadline();
    }, function () { empty.textContent = "Could not load " + split.file + "."; });
  }

  function renderHeadline() {
    var table = document.getElementById("headline-table");
    var suite = head.suites[hf("suite").value], split = suite && suite.splits[hf("split").value];
    if (split && !split.entries) return loadSplit(suite, split);
    empty.textContent = EMPTY;
    var metric = hf("metric").value, withCi = hf("ci").checked, on = headChosen();
    var mi = head.metrics.findIndex(function (m) { return m.key === metric; });
    var label = mi >= 0 ? head.metrics[mi].label : metric;
    var dominated = noiseNote(split, mi, label);
    table.classList.toggle("unranked", dominated);
    var cols = HEAD_COLS.filter(function (c) { return on[c.key]; });
    var others = head.metrics.map(function (m, i) { return i; }).filter(function (i) { return i !== mi && on[head.metrics[i].key]; });
    var th = function (cls, text, title) {
      var h = el("th", cls, text);
      h.setAttribute("scope", "col");
      if (title) h.title = title;
      return h;
    };
    var metricHead = function (i, primary) {
      var m = head.metrics[i], h = th("num" + (primary ? " primary" : ""), m.label + (m.hib ? " \u2191" : " \u2193"),
        primary ? "ranked by " + m.label + "; under each value, \u0394 to the same base alone" : null);
      h.dataset.metric = m.key;
      return h;
    };
    var tr = el("tr");
    tr.appendChild(th("text row-name", dominated ? "Row (not ranked)" : "# \u00A0Row"));
    if (mi >= 0) tr.appendChild(metricHead(mi, true));
    cols.forEach(function (c) {
      tr.appendChild(th(c.cls, c.label, c.key === "seed" ? "where the training-seed noise of the difference to the base alone (" +
        label + ") comes from: own = the spread over the seeds of its seed group; fallback = the largest spread of this " +
        "split and metric; none = unmeasured" : c.title));
    });
    others.forEach(function (i) { tr.appendChild(metricHead(i, false)); });
    var withSource = SOURCES && on.source;
    if (withSource) {
      tr.appendChild(th("text", "Source", "the bundle the row's values come from, its status and contributor; \u26A0: " +
        "another bundle of the same status gives other values for this row"));
    }
    table.tHead.replaceChildren(tr);
    var body = document.createDocumentFragment(), order = split ? (split.order[metric] || []) : [];
    order.forEach(function (o, rank) {
      var e = split.entries[o[0]], row = el("tr", "kind-" + e.k), pm = mi >= 0 ? e.m[mi] : null;
      row.dataset.base = e.b;
      if (e.k !== "alone" && pm && (pm[4] & 4)) row.classList.add("within-noise");
      var name = el("th", "t row-name");
      name.setAttribute("scope", "row");
      if (!dominated) name.appendChild(el("span", "rank", String(rank + 1)));
      name.appendChild(el("span", "role", o[1]));
      name.appendChild(el("span", "who", e.o));  /* the models, under the role where the Models column is off screen */
      row.appendChild(name);
      if (mi >= 0) row.appendChild(metricCell(mi, e, true, withCi));
      cols.forEach(function (c) {
        var td;
        if (c.key === "method") { td = el("td", "t method", e.l); td.title = e.v; }
        else if (c.key === "models") td = membersCell(e.o);
        else if (c.key === "gflops") { td = el("td", "num gflops", fmtCost(e.g, ".3g")); td.dataset.sort = sortText(e.g); }
        else if (c.key === "ti" || c.key === "tp") {
          var v = c.key === "ti" ? e.ti : e.tp;
          td = el("td", "num " + c.key, fmtCost(v, "si"));
          td.dataset.sort = sortText(v);
        } else {
          td = el("td", "t seed-source", e.k === "alone" || !pm ? "" : seedSource(pm) + (seedSource(pm) === "own" ? " (" + pm[6] + " seeds)" : ""));
          if (e.k !== "alone" && pm) td.title = seedText(pm);
        }
        row.appendChild(td);
      });
      others.forEach(function (i) { row.appendChild(metricCell(i, e, false, withCi)); });
      if (withSource) row.appendChild(sourceCell(e.src, e.cf));
      body.appendChild(row);
    });
    table.tBodies[0].replaceChildren(body);
    empty.hidden = order.length > 0;
    showFigs(suite, split);
    renderSpread(split);
  }

  function renderSpread(split) {
    var det = document.getElementById("seed-spread"), table = det.querySelector("table.spread");
    var recs = split ? split.spread : [];
    var tr = el("tr");
    tr.appendChild(el("th", "text row-name", "Model (seeds)"));
    head.metrics.forEach(function (m) { tr.appendChild(el("th", "num", m.label + (m.hib ? " \u2191" : " \u2193"))); });
    tr.querySelectorAll("th").forEach(function (h) { h.setAttribute("scope", "col"); });
    table.tHead.replaceChildren(tr);
    var body = document.createDocumentFragment();
    recs.forEach(function (r) {
      var row = el("tr"), name = el("th", "t row-name", r.w + " (" + r.n + ")");
      name.setAttribute("scope", "row");
      row.appendChild(name);
      head.metrics.forEach(function (m, i) {
        var s = r.m[i], td = el("td", "num");
        if (s) {
          td.appendChild(el("span", "v", fmtMetric(s[0]) + " \u00B1 " + fmtMetric(s[1])));
          td.appendChild(el("span", "d", "[" + fmtMetric(s[2]) + ", " + fmtMetric(s[3]) + "]"));
          var dd = r.d ? r.d[i] : null;
          if (dd) td.appendChild(el("span", "d", "\u0394 " + fmtDiff(dd[0]) + " \u00B1 " + fmtMetric(dd[1])));
        } else td.textContent = "\u2014";
        row.appendChild(td);
      });
      body.appendChild(row);
    });
    table.tBodies[0].replaceChildren(body);
    det.querySelector(".count").textContent = recs.length + " rows";
    det.querySelector(".spread-empty").hidden = recs.length > 0;
  }

  hform.addEventListener("change", function (ev) {
    if (ev.target.name === "suite") fillSplits();
    renderHeadline();
  });
  /* a column chooser (details) closes on Escape, the focus back on its summary */
  document.addEventListener("keydown", function (ev) {
    var open = ev.key === "Escape" && ev.target.closest && ev.target.closest("details.columns[open]");
    if (open) { open.open = false; open.querySelector("summary").focus(); }
  });
  fillSplits();
  renderHeadline();
  if (window.performance && performance.mark) performance.mark("uq-headline");
})();
