// memsearch console: what the pages gain with JavaScript (every page reads without it).
//   - keys: "/" search, "j"/"k" next/previous entry or hit, "o" or Enter opens it;
//   - live updates: the main part reloads when memory changes (hooks, watch, MCP, the CLI);
//   - charts: "What memory did" draws its numbers (the page's JSON data) as SVG bars.
// No library, no build step; the Content-Security-Policy allows this file and nothing inline.
"use strict";

(function () {
  const main = () => document.getElementById("main");

  // --- keys -------------------------------------------------------------------------------------
  function items() {
    return Array.from(document.querySelectorAll(".entry > a:not(.forget), .hit .actions a:first-child, .finding > a:first-child"));
  }
  function typing(target) {
    return target && /^(INPUT|SELECT|TEXTAREA)$/.test(target.tagName);
  }
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    if (event.key === "/") {
      const box = document.getElementById("q");
      event.preventDefault();
      if (box) box.focus();
      else window.location.href = "/search?p=" + encodeURIComponent(main().dataset.project || "");
      return;
    }
    if (event.key !== "j" && event.key !== "k" && event.key !== "o") return;
    const list = items();
    if (!list.length) return;
    const at = list.indexOf(document.activeElement);
    if (event.key === "o") {
      if (at >= 0) list[at].click();
      return;
    }
    const next = event.key === "j" ? Math.min(at + 1, list.length - 1) : Math.max(at - 1, 0);
    list[next].focus();
    list[next].scrollIntoView({ block: "nearest" });
    event.preventDefault();
  });

  // --- live updates -----------------------------------------------------------------------------
  let seen = null;
  let status = null;
  async function stamp() {
    const key = main().dataset.project || "";
    const answer = await fetch("/api/version?p=" + encodeURIComponent(key), { credentials: "same-origin" });
    if (!answer.ok) return null;
    return (await answer.json()).version;
  }
  async function refresh() {
    const answer = await fetch(window.location.href, { credentials: "same-origin" });
    if (!answer.ok) return;
    const fresh = new DOMParser().parseFromString(await answer.text(), "text/html").getElementById("main");
    if (!fresh) return;
    main().replaceChildren(...Array.from(fresh.childNodes).map((node) => document.importNode(node, true)));
    charts();
    if (status) status.textContent = "updated " + new Date().toLocaleTimeString();
  }
  async function poll() {
    if (document.hidden || typing(document.activeElement)) return;
    try {
      const now = await stamp();
      if (now === null) return;
      if (seen !== null && now !== seen) await refresh();
      seen = now;
    } catch (error) {
      /* the console stopped: keep the page as it is */
    }
  }
  function live() {
    if (!main() || !main().dataset.live) return;
    status = document.createElement("p");
    status.className = "live";
    status.setAttribute("role", "status");
    status.setAttribute("aria-live", "polite");
    status.textContent = "live";
    document.body.appendChild(status);
    poll();
    window.setInterval(poll, 2000);
  }

  // --- charts -----------------------------------------------------------------------------------
  const SVG = "http://www.w3.org/2000/svg";
  function node(name, attrs, text) {
    const element = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attrs)) element.setAttribute(key, String(value));
    if (text !== undefined) element.textContent = text;
    return element;
  }
  function chart(figure, days) {
    const keys = figure.dataset.chart.split(",");
    const width = 600;
    const height = 160;
    const left = 40;
    const bottom = 20;
    const top = 8;
    const most = Math.max(1, ...days.flatMap((day) => keys.map((key) => day[key] || 0)));
    const slot = (width - left) / Math.max(days.length, 1);
    const bar = Math.max(1, (slot * 0.8) / keys.length);
    const svg = node("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": figure.querySelector("figcaption").textContent });
    svg.appendChild(node("line", { x1: left, y1: height - bottom, x2: width, y2: height - bottom, class: "axis" }));
    svg.appendChild(node("text", { x: left - 4, y: top + 8, "text-anchor": "end" }, String(most)));
    svg.appendChild(node("text", { x: left - 4, y: height - bottom, "text-anchor": "end" }, "0"));
    days.forEach((day, i) => {
      keys.forEach((key, k) => {
        const value = day[key] || 0;
        const h = ((height - bottom - top) * value) / most;
        const rect = node("rect", {
          x: left + i * slot + slot * 0.1 + k * bar,
          y: height - bottom - h,
          width: bar,
          height: h,
          class: "s" + k,
        });
        rect.appendChild(node("title", {}, `${day.day} ${key.replace(/_/g, " ")}: ${value}`));
        svg.appendChild(rect);
      });
    });
    if (days.length) {
      svg.appendChild(node("text", { x: left, y: height - 4 }, days[0].day));
      svg.appendChild(node("text", { x: width, y: height - 4, "text-anchor": "end" }, days[days.length - 1].day));
    }
    const legend = document.createElement("p");
    legend.className = "legend";
    keys.forEach((key, k) => {
      const item = document.createElement("span");
      item.className = "key" + k;
      item.textContent = key.replace(/_/g, " ") + " ";
      legend.appendChild(item);
    });
    figure.querySelectorAll("svg, .legend").forEach((old) => old.remove());
    figure.appendChild(svg);
    figure.appendChild(legend);
  }
  function charts() {
    const data = document.getElementById("recall-data");
    if (!data) return;
    const report = JSON.parse(data.textContent);
    document.querySelectorAll("figure[data-chart]").forEach((figure) => chart(figure, report.by_day));
  }

  document.addEventListener("DOMContentLoaded", () => {
    charts();
    live();
  });
})();
