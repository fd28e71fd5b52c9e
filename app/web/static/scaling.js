// The scaling page's chart (a static file: the Content-Security-Policy allows no inline script).
document.addEventListener("DOMContentLoaded", function () {
  var canvas = document.getElementById("scaling-chart");
  if (!canvas || typeof Chart === "undefined") return;
  var d = JSON.parse(document.getElementById("scaling-data").textContent);
  new Chart(canvas, {
    data: { labels: d.labels, datasets: [
      { type: "bar", label: "tokens/s", data: d.tokens_per_s, backgroundColor: "#0b5cad", yAxisID: "y" },
      { type: "line", label: "efficiency %", data: d.efficiency, borderColor: "#d1242f", yAxisID: "y1" }
    ] },
    options: { responsive: true, maintainAspectRatio: false, animation: false,
      scales: { x: { title: { display: true, text: "GPUs" } },
                y: { beginAtZero: true, title: { display: true, text: "tokens/s" } },
                y1: { position: "right", min: 0, suggestedMax: 110, grid: { drawOnChartArea: false }, title: { display: true, text: "efficiency %" } } },
      plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } } } }
  });
});
