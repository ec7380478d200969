/* Leaderboard: headline table, full tables rendered from data files on demand (sorted,
   filtered, paged). Plain JavaScript, no network: data files are script elements. The Pareto
   charts (charts.js) share the data files and the filters through window.UQ. */
(function () {
  "use strict";
  document.documentElement.classList.add("js");
  var PAGE = 100;           // rows rendered at a time in a full table
  var PREFERRED = "~preferred";
  var CELLS = 9;            // fields of a data row before its cells (benchmark.report.pagedata.CELLS)
  var head = JSON.parse(document.getElementById("uq-headline").textContent);
  var ANCHORS = head.anchors || {};

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  /* ---- number formats (as benchmark.report.tables.fmt_metric / fmt_num) ---- */
  function fmtMetric(v) {
    if (v === null || v === undefined || isNaN(v)) return "NaN";
    return Math.abs(v) < 0.1 ? v.toFixed(5) : v.toFixed(4);
  }
  function fmtDiff(v) {
    if (v === null || v === undefined || isNaN(v)) return "";
    return (v >= 0 ? "+" : "\u2212") + fmtMetric(Math.abs(v));
  }
  function fmtCount(v) {  /* as benchmark.report.tables.fmt_count: 0, 500, 4.0k, 16k, 3.4M */
    var units = ["", "k", "M", "G", "T", "P"], i = 0;
    while (v >= 999.5 && i < units.length - 1) { v = v / 1000; i++; }
    var d = i && v < 9.95 ? 1 : 0, p = Math.pow(10, d);
    return (Math.floor(v * p + 0.5) / p).toFixed(d) + units[i];
  }
  function fmtCost(v, spec, scale) {
    if (v === null || v === undefined || isNaN(v) || v < 0) return "\u2014";
    v = v / (scale || 1);
    if (spec === "si") return fmtCount(v);
    var m = /^\.(\d+)([fg])$/.exec(spec || ".4g");
    if (!m) return String(v);
    var d = parseInt(m[1], 10);
    return m[2] === "f" ? v.toFixed(d) : String(parseFloat(v.toPrecision(d)));
  }
  function sortText(v) { return v === null || v === undefined || isNaN(v) ? "NaN" : String(parseFloat(v.toPrecision(7))); }

  /* ---- data files: loaded as script elements that call UQ.put(key, data) ---- */
  var store = {}, waiting = {};
  window.UQ = {
    put: function (key, data) {
      store[key] = data;
      (waiting[key] || []).forEach(function (f) { f(data); });
      delete waiting[key];
    }
  };
  function loadData(key, file, then, failed) {
    if (store[key]) return then(store[key]);
    if (!waiting[key]) {
      waiting[key] = [];
      var s = document.createElement("script");
      s.src = file;
      s.onerror = function () { (failed || function () {})(); };
      document.body.appendChild(s);
    }
    waiting[key].push(then);
  }
  function load(det, then) {
    loadData(det.dataset.key, det.dataset.file, then, function () {
      det.querySelector(".no-match").textContent = "Could not load " + det.dataset.file + ".";
      det.querySelector(".no-match").hidden = false;
    });
  }

  /* ---- full tables ---- */
  var states = new WeakMap();   // details.split -> {data, order, shown, sortCol, asc}

  function cellValue(data, row, c) {
    var col = data.columns[c], v = row[CELLS + c];
    if (col.metric) return v ? v[0] : null;
    if (col.num) return v;
    return Array.isArray(v) ? data.s[v[0]] : data.s[v];
  }

  function buildHead(det, data) {
    var table = det.querySelector("table.results"), tr = el("tr");
    data.columns.forEach(function (c, i) {
      var th = el("th", c.num ? "num" : "text");
      th.title = c.title; th.setAttribute("scope", "col"); th.setAttribute("aria-sort", "none");
      if (c.metric) th.dataset.metric = c.key;
      var b = el("button", "sort", c.label);
      b.type = "button"; b.dataset.col = i; b.dataset.num = c.num ? "1" : "0";
      th.appendChild(b); tr.appendChild(th);
    });
    var prov = el("th", "text", "Provenance");
    prov.title = "models used (links to their provenance) and the hash of the inputs";
    tr.appendChild(prov);
    table.tHead.appendChild(tr);
  }

  function renderRow(data, row) {
    var s = data.s, tr = el("tr");
    tr.dataset.base = s[row[0]]; tr.dataset.family = s[row[1]];
    tr.dataset.fit = s[row[2]]; tr.dataset.confidence = s[row[3]];
    tr.dataset.balance = sortText(row[5]);
    data.columns.forEach(function (c, i) {
      var v = row[CELLS + i], td;
      if (c.metric) {
        td = el("td", v[0] === null ? "nan" : "", fmtMetric(v[0]));
        td.dataset.sort = sortText(v[0]);
        if (v[1] !== null && v[2] !== null) td.appendChild(el("span", "ci", "[" + fmtMetric(v[1]) + ", " + fmtMetric(v[2]) + "]"));
      } else if (c.num) {
        td = el("td", "", fmtCost(v, c.fmt, c.scale));
        td.dataset.sort = sortText(v);
      } else if (Array.isArray(v)) {
        td = el("td", "t", s[v[0]]);
        if (s[v[1]]) td.title = s[v[1]];
      } else {
        td = el("td", "t", s[v]);
      }
      tr.appendChild(td);
    });
    var prov = el("td", "t prov");
    row[7].forEach(function (m, i) {
      if (i) prov.appendChild(document.createTextNode(" + "));
      var a = el("a", "", s[m]);
      a.href = "#" + (ANCHORS[s[m]] || "");
      prov.appendChild(a);
    });
    if (s[row[6]]) {
      prov.appendChild(document.createTextNode(" "));
      var code = el("code", "", s[row[6]].slice(0, 12));
      code.title = "inputs_hash " + s[row[6]];
      prov.appendChild(code);
    }
    tr.appendChild(prov);
    return tr;
  }

  function passes(data, row, want, range) {
    var s = data.s, vals = { base: s[row[0]], family: s[row[1]], fit: s[row[2]], confidence: s[row[3]] };
    var pref = { fit: row[4] & 1, confidence: row[4] & 2 };
    for (var k in want) {
      if (!want[k]) continue;
      if (want[k] === PREFERRED ? !pref[k] : vals[k] !== want[k]) return false;
    }
    if (range.on) {
      var b = row[5];
      if (b === null) return range.keepNone;
      if (!isNaN(range.min) && b < range.min) return false;
      if (!isNaN(range.max) && b > range.max) return false;
    }
    return true;
  }

  function selection(form) {
    var f = function (n) { return form.elements.namedItem(n); };
    var want = { base: f("base").value, family: f("family").value, fit: f("fit").value, confidence: f("confidence").value };
    var range = { min: parseFloat(f("bmin").value), max: parseFloat(f("bmax").value), keepNone: f("nobalance").checked };
    range.on = !isNaN(range.min) || !isNaN(range.max);
    return { want: want, range: range, ci: f("ci").checked };
  }

  function render(det) {
    var st = states.get(det);
    if (!st) return;
    var data = st.data, sel = selection(det.closest("section.suite").querySelector("form.filters"));
    var rows = st.order.filter(function (i) { return passes(data, data.rows[i], sel.want, sel.range); });
    var tbody = det.querySelector("table.results").tBodies[0], frag = document.createDocumentFragment();
    rows.slice(0, st.shown).forEach(function (i) { frag.appendChild(renderRow(data, data.rows[i])); });
    tbody.replaceChildren(frag);
    var total = data.rows.length;
    det.querySelector(".count").textContent = rows.length === total ? total + " rows" : rows.length + " of " + total + " rows";
    det.querySelector(".no-match").hidden = rows.length > 0;
    var pager = det.querySelector(".pager");
    pager.hidden = rows.length <= st.shown;
    pager.querySelector("button").textContent = "Show " + Math.min(PAGE, rows.length - st.shown) + " more of " + (rows.length - st.shown) + " hidden rows";
  }

  function sortRows(st, col, numeric, ascending) {
    var data = st.data;
    var keys = data.rows.map(function (r) { return cellValue(data, r, col); });
    st.order = data.rows.map(function (_, i) { return i; });
    st.order.sort(function (a, b) {
      var ka = keys[a], kb = keys[b];
      if (numeric) {
        var an = ka === null || isNaN(ka), bn = kb === null || isNaN(kb);
        if (an || bn) return an === bn ? a - b : (an ? 1 : -1);
        return (ascending ? ka - kb : kb - ka) || a - b;
      }
      var c = String(ka).localeCompare(String(kb));
      return (ascending ? c : -c) || a - b;
    });
  }

  function openSplit(det) {
    if (states.get(det) || !det.open) return;
    load(det, function (data) {
      if (states.get(det)) return;
      states.set(det, { data: data, order: data.rows.map(function (_, i) { return i; }), shown: PAGE });
      buildHead(det, data);
      render(det);
      det.dataset.ready = "1";
      if (window.performance && performance.mark) performance.mark("uq-table");
    });
  }

  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("table.results th button.sort");
    if (btn) {
      var th = btn.parentElement, det = th.closest("details.split"), st = states.get(det);
      var ascending = th.getAttribute("aria-sort") !== "ascending";
      th.closest("tr").querySelectorAll("th").forEach(function (h) { h.setAttribute("aria-sort", "none"); });
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      sortRows(st, parseInt(btn.dataset.col, 10), btn.dataset.num === "1", ascending);
      render(det);
      return;
    }
    var more = ev.target.closest(".pager button");
    if (more) {
      var d = more.closest("details.split");
      states.get(d).shown += PAGE;
      render(d);
    }
  });

  // shared with the charts (charts.js)
  window.UQ.CELLS = CELLS;
  window.UQ.load = loadData;
  window.UQ.passes = passes;
  window.UQ.selection = selection;
  window.UQ.fmtMetric = fmtMetric;
  window.UQ.fmtCost = fmtCost;

  document.querySelectorAll("details.split").forEach(function (det) {
    det.addEventListener("toggle", function () { openSplit(det); });
    openSplit(det);
  });

  document.querySelectorAll("form.filters").forEach(function (form) {
    var suite = form.closest("section.suite");
    var apply = function () {
      suite.classList.toggle("show-ci", form.elements.namedItem("ci").checked);
      suite.querySelectorAll("details.split").forEach(render);
    };
    form.addEventListener("input", apply);
    form.addEventListener("change", apply);
    form.addEventListener("reset", function () { setTimeout(apply, 0); });
    apply();
  });

  /* ---- headline ---- */
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
      note.replaceChildren(el("strong", "", "Differences on this split are within the training-seed spread: shown, not ranked."),
        document.createTextNode(" " + label + ": the median |\u0394| of the rows below, " + fmtMetric(v[1]) + ", is under " +
          head.factor + " \u00D7 " + fmtMetric(v[0]) + ", the largest spread of a model alone across its training seeds; " +
          "the rows keep a fixed order (by base), with no rank."));
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

  function renderHeadline() {
    var table = document.getElementById("headline-table");
    var suite = head.suites[hf("suite").value], split = suite && suite.splits[hf("split").value];
    var metric = hf("metric").value, withCi = hf("ci").checked;
    var mi = head.metrics.findIndex(function (m) { return m.key === metric; });
    var dominated = noiseNote(split, mi, mi >= 0 ? head.metrics[mi].label : metric);
    table.classList.toggle("unranked", dominated);
    var tr = el("tr");
    ["#", "Row", "Method", "Models", "GFLOPs", "Train img", "Trained params", "Seed noise"].forEach(function (t, i) {
      tr.appendChild(el("th", i === 0 || (i >= 4 && i <= 6) ? "num" : "text", t));
    });
    tr.children[5].title = "training budget: training images processed to make the row's models (epochs x images x members), " +
      "summed over every training run behind it, the fine-tunes it builds on included";
    tr.children[6].title = "training budget: parameters trained, summed over the training runs behind the row";
    tr.lastChild.title = "where the training-seed noise of the difference to the base alone (" + (mi >= 0 ? head.metrics[mi].label : metric) +
      ") comes from: own = the spread over the seeds of its seed group; fallback = the largest spread of this split and metric; none = unmeasured";
    head.metrics.forEach(function (m) {
      var th = el("th", "num" + (m.key === metric ? " primary" : ""), m.label + (m.hib ? " \u2191" : " \u2193"));
      th.dataset.metric = m.key;
      tr.appendChild(th);
    });
    if (SOURCES) {
      var sh = el("th", "text", "Source");
      sh.title = "the bundle the row's values come from, its status and contributor; \u26A0: another bundle of the same " +
        "status gives other values for this row";
      tr.appendChild(sh);
    }
    table.tHead.replaceChildren(tr);
    var body = document.createDocumentFragment(), order = split ? (split.order[metric] || []) : [];
    order.forEach(function (o, rank) {
      var e = split.entries[o[0]], row = el("tr", "kind-" + e.k), pm = mi >= 0 ? e.m[mi] : null;
      row.dataset.base = e.b;
      if (e.k !== "alone" && pm && (pm[4] & 4)) row.classList.add("within-noise");
      row.appendChild(el("td", "num rank", dominated ? "" : String(rank + 1)));
      row.appendChild(el("td", "t role", o[1]));
      var meth = el("td", "t", e.l);
      meth.title = e.v;
      row.appendChild(meth);
      row.appendChild(el("td", "t", e.o));
      var g = el("td", "num", fmtCost(e.g, ".3g"));
      g.dataset.sort = sortText(e.g);
      row.appendChild(g);
      [e.ti, e.tp].forEach(function (v) {
        var td = el("td", "num", fmtCost(v, "si"));
        td.dataset.sort = sortText(v);
        row.appendChild(td);
      });
      var src = el("td", "t seed-source", e.k === "alone" || !pm ? "" : seedSource(pm) + (seedSource(pm) === "own" ? " (" + pm[6] + " seeds)" : ""));
      if (e.k !== "alone" && pm) src.title = seedText(pm);
      row.appendChild(src);
      head.metrics.forEach(function (m, i) { row.appendChild(metricCell(i, e, m.key === metric, withCi)); });
      if (SOURCES) row.appendChild(sourceCell(e.src, e.cf));
      body.appendChild(row);
    });
    table.tBodies[0].replaceChildren(body);
    document.querySelector(".headline-empty").hidden = order.length > 0;
    var key = suite && split ? suite.name + "/" + split.name : "";
    document.querySelectorAll(".headline-figs").forEach(function (d) { d.hidden = d.dataset.key !== key; });
    renderSpread(split);
  }

  function renderSpread(split) {
    var det = document.getElementById("seed-spread"), table = det.querySelector("table.spread");
    var recs = split ? split.spread : [];
    var tr = el("tr");
    tr.appendChild(el("th", "text", "Model (seeds)"));
    head.metrics.forEach(function (m) { tr.appendChild(el("th", "num", m.label + (m.hib ? " \u2191" : " \u2193"))); });
    table.tHead.replaceChildren(tr);
    var body = document.createDocumentFragment();
    recs.forEach(function (r) {
      var row = el("tr");
      row.appendChild(el("td", "t", r.w + " (" + r.n + ")"));
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
  fillSplits();
  renderHeadline();
  if (window.performance && performance.mark) performance.mark("uq-headline");

  /* ---- links into closed <details>: open them ---- */
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    for (var e = id && document.getElementById(id); e; e = e.parentElement) {
      if (e.tagName === "DETAILS") e.open = true;
    }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
})();
