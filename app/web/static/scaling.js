// The scaling page's chart (a static file: the Content-Security-Policy allows no inline script).
// Bars: tokens/s on the left axis. Line: scaling efficiency on its own right-hand axis, scaled to
// the data (not a flat 0-120 %), and drawn above the bars (a lower `order` draws later).
document.addEventListener("DOMContentLoaded", function () {
  var canvas = document.getElementById("scaling-chart");
  if (!canvas || typeof Chart === "undefined") return;
  var d = JSON.parse(document.getElementById("scaling-data").textContent);
  var eff = d.efficiency.filter(function (v) { return v != null; });
  var lo = eff.length ? Math.min.apply(null, eff) : 0, hi = eff.length ? Math.max.apply(null, eff) : 100;
  var pad = Math.max(2, (hi - lo) * 0.15);
  canvas.chart = new Chart(canvas, {
    data: { labels: d.labels, datasets: [
      { type: "line", label: "scaling efficiency (%)", data: d.efficiency, borderColor: "#d1242f",
        backgroundColor: "#d1242f", borderWidth: 2.5, pointRadius: 4, yAxisID: "y1", order: 0 },
      { type: "bar", label: "tokens/s", data: d.tokens_per_s, backgroundColor: "#7aa7d9", yAxisID: "y", order: 1 }
    ] },
    options: { responsive: true, maintainAspectRatio: false, animation: false,
      scales: { x: { title: { display: true, text: "GPUs" } },
                y: { beginAtZero: true, title: { display: true, text: "tokens/s" } },
                y1: { position: "right", min: Math.max(0, Math.floor(lo - pad)), max: Math.ceil(hi + pad),
                      grid: { drawOnChartArea: false }, title: { display: true, text: "scaling efficiency (%)", color: "#d1242f" },
                      ticks: { color: "#d1242f" } } },
      plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } } } }
  });
});
