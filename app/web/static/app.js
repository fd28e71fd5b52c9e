// Parallel Planner page script: draws the charts described by JSON blocks next to each
// <canvas data-chart>, and wires the copy buttons. Works after htmx swaps (htmx.onLoad).
(function () {
  "use strict";
  var COLORS = ["#0b5cad", "#1a7f37", "#bf8700", "#8250df", "#cf222e", "#0a7ea4", "#6e7781",
                "#e16f24", "#57ab5a", "#a475f9", "#7d4e00", "#e85aad", "#00a3a3", "#424a53",
                "#9a6700", "#6cb6ff"];

  // A vertical (or horizontal) dashed line at a value on the value axis, with a label.
  var limitLine = {
    id: "limitLine",
    afterDatasetsDraw: function (chart, _args, opts) {
      if (opts == null || opts.value == null) return;
      var horizontal = chart.options.indexAxis === "y";
      var scale = horizontal ? chart.scales.x : chart.scales.x;
      if (!horizontal && opts.axis === "y") scale = chart.scales.y;
      var ctx = chart.ctx, area = chart.chartArea;
      var px = scale.getPixelForValue(opts.value);
      ctx.save();
      ctx.strokeStyle = "#d1242f"; ctx.lineWidth = 2; ctx.setLineDash([6, 4]);
      ctx.beginPath();
      if (opts.axis === "y") { ctx.moveTo(area.left, px); ctx.lineTo(area.right, px); }
      else { ctx.moveTo(px, area.top); ctx.lineTo(px, area.bottom); }
      ctx.stroke();
      ctx.setLineDash([]); ctx.fillStyle = "#d1242f"; ctx.font = "12px system-ui, sans-serif";
      if (opts.label) {
        // The label sits in the padding above the plot (never over the data), aligned so it
        // stays inside the canvas whichever side of the plot the line is on.
        if (opts.axis === "y") ctx.fillText(opts.label, area.left + 4, px - 4);
        else {
          var right = px > (area.left + area.right) / 2;
          ctx.textAlign = right ? "right" : "left";
          ctx.textBaseline = "bottom";
          ctx.fillText(opts.label, right ? px - 4 : px + 4, area.top - 2);
        }
      }
      ctx.restore();
    }
  };

  function stacked(data, unit, limit) {
    var datasets = data.labels.map(function (label, i) {
      return { label: label, data: [data.values[i]], backgroundColor: COLORS[i % COLORS.length] };
    });
    var max = data.axis_max || data.capacity || undefined;
    return {
      type: "bar",
      data: { labels: [""], datasets: datasets },
      options: {
        indexAxis: "y", responsive: true, maintainAspectRatio: false, animation: false,
        layout: { padding: { top: limit ? 16 : 0 } },
        scales: { x: { stacked: true, min: 0, max: max, title: { display: true, text: unit } },
                  y: { stacked: true } },
        plugins: {
          legend: { position: "bottom", labels: { boxWidth: 12 } },
          tooltip: { callbacks: { label: function (c) { return c.dataset.label + ": " + c.formattedValue + " " + unit; } } },
          limitLine: limit
        }
      },
      plugins: [limitLine]
    };
  }

  function scatter(data) {
    var fits = data.points.filter(function (p) { return p.fits; });
    var over = data.points.filter(function (p) { return !p.fits; });
    var datasets = [];
    if (fits.length || !over.length) datasets.push({ label: "fits", data: fits, backgroundColor: "#0b5cad", pointRadius: 4 });
    if (over.length) {  // the legend promises hollow points only when some are drawn
      datasets.push({ label: "does not fit", data: over, backgroundColor: "rgba(0,0,0,0)", borderColor: "#cf222e", pointRadius: 4, pointStyle: "circle", borderWidth: 1.5 });
    }
    var xs = data.points.map(function (p) { return p.x; });
    if (data.limit != null) xs.push(data.limit);
    var xmax = xs.length ? Math.max.apply(null, xs) * 1.05 : undefined;  // the limit stays inside
    return {
      type: "scatter",
      data: { datasets: datasets },
      options: {
        responsive: true, maintainAspectRatio: false, animation: false,
        layout: { padding: { top: data.limit == null ? 0 : 16 } },
        scales: { x: { min: 0, suggestedMax: xmax, title: { display: true, text: "memory per GPU (GiB)" } },
                  y: { title: { display: true, text: "tokens/s per GPU" } } },
        plugins: {
          legend: { position: "bottom", labels: { boxWidth: 12 } },
          tooltip: { callbacks: { label: function (c) { var p = c.raw; return (p.label || "") + ": " + Math.round(p.y).toLocaleString() + " tok/s, " + p.x.toFixed(1) + " GiB"; } } },
          limitLine: data.limit == null ? null : { value: data.limit, label: "memory limit " + data.limit.toFixed(1) + " GiB" }
        }
      },
      plugins: [limitLine]
    };
  }

  function calibration(data) {
    var all = data.before.concat(data.after);
    var hi = Math.max.apply(null, all.map(function (p) { return Math.max(p.x, p.y); }).concat([1])) * 1.05;
    var step = Math.pow(10, Math.floor(Math.log10(hi))) / 2;
    hi = Math.ceil(hi / step) * step;  // a round axis end (35,000), not 33,983.04
    return {
      type: "scatter",
      data: { datasets: [
        { label: "before the fit", data: data.before, backgroundColor: "rgba(0,0,0,0)", borderColor: "#6e7781", pointRadius: 4, borderWidth: 1.5 },
        { label: "after the fit", data: data.after, backgroundColor: "#0b5cad", pointRadius: 4 },
        { label: "perfect", type: "line", data: [{ x: 0, y: 0 }, { x: hi, y: hi }], borderColor: "#d1242f", borderDash: [6, 4], pointRadius: 0, borderWidth: 1.5 }
      ] },
      options: {
        responsive: true, maintainAspectRatio: false, animation: false,
        scales: { x: { min: 0, max: hi, title: { display: true, text: "measured tokens/s per GPU" } },
                  y: { min: 0, max: hi, title: { display: true, text: "predicted tokens/s per GPU" } } },
        plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } },
          tooltip: { callbacks: { label: function (c) { var p = c.raw; return (p.label || "") + ": measured " + p.x + ", predicted " + p.y; } } } }
      }
    };
  }

  function draw(canvas) {
    if (typeof Chart === "undefined" || canvas.chart) return;
    var block = document.querySelector('script[data-chart-for="' + canvas.id + '"]');
    if (!block) return;
    var data = JSON.parse(block.textContent);
    var config = null;
    if (data.kind === "memory") config = stacked(data, "GiB", { value: data.limit, label: data.limit_label });
    else if (data.kind === "time") config = stacked({ labels: data.labels, values: data.values }, "s", null);
    else if (data.kind === "scatter") config = scatter(data);
    else if (data.kind === "calibration") config = calibration(data);
    if (config) canvas.chart = new Chart(canvas, config);
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    return new Promise(function (resolve, reject) {  // fallback for plain-http hosts
      var area = document.createElement("textarea");
      area.value = text; area.setAttribute("readonly", ""); area.style.position = "fixed"; area.style.opacity = "0";
      document.body.appendChild(area); area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      document.body.removeChild(area);
      if (ok) resolve(); else reject(new Error("copy refused"));
    });
  }

  function wireCopy(button) {
    if (button.dataset.wired) return;
    button.dataset.wired = "1";
    button.addEventListener("click", function () {
      var target = document.getElementById(button.dataset.copyTarget);
      var status = document.getElementById("copy-status");
      copyText(target.textContent).then(function () {
        if (status) status.textContent = "Copied to the clipboard.";
      }, function () {
        var range = document.createRange(); range.selectNodeContents(target);
        var sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
        if (status) status.textContent = "Selected: press Ctrl+C to copy.";
      });
    });
  }

  // A table wider than the window scrolls sideways inside its .table-wrap; a keyboard user can
  // scroll it only if the scroller takes the focus (arrow keys then scroll it), so one that
  // overflows becomes a named tab stop, and one that fits is left out of the tab order.
  function tableName(wrap) {
    var table = wrap.querySelector("table"), caption = table && table.querySelector("caption");
    if (caption && caption.textContent.trim()) return caption.textContent.trim();
    for (var el = wrap.previousElementSibling || wrap.parentElement; el; el = el.previousElementSibling || el.parentElement) {
      if (/^H[1-4]$/.test(el.tagName)) return el.textContent.trim();
      if (el === document.body) break;
    }
    return "Table";
  }

  function markScrollers() {
    document.querySelectorAll(".table-wrap").forEach(function (wrap) {
      if (wrap.scrollWidth > wrap.clientWidth + 1) {
        wrap.setAttribute("tabindex", "0");
        wrap.setAttribute("role", "region");
        wrap.setAttribute("aria-label", tableName(wrap) + " (scrolls sideways: arrow keys)");
      } else if (wrap.getAttribute("role") === "region") {
        wrap.removeAttribute("tabindex"); wrap.removeAttribute("role"); wrap.removeAttribute("aria-label");
      }
    });
  }
  window.addEventListener("resize", markScrollers);

  function init(root) {
    (root || document).querySelectorAll("canvas[data-chart]").forEach(draw);
    (root || document).querySelectorAll("[data-copy-target]").forEach(wireCopy);
    markScrollers();
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (window.htmx) window.htmx.onLoad(function (el) { init(el.querySelectorAll ? el : document); });
    init(document);
  });
  window.plannerCharts = { init: init };
})();
