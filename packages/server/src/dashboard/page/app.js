// The dashboard in the browser: polls /dashboard/data every second and draws each policy. No libraries.
const POLL_MS = 1000;
const SVG = 'http://www.w3.org/2000/svg';
const CHART_HEIGHT = 150;
const PAD = { left: 44, right: 8, top: 8, bottom: 20 };
/** How many of the most-denied identifiers a card lists (the service keeps more). */
const TOP_SHOWN = 10;

const FAILURE_TEXT = {
  allow: 'fails open: allows every request while the store is down',
  deny: 'fails closed: denies every request while the store is down',
  fallback: 'falls back: decides in this process with the same policy while the store is down',
};

/** Creates an element with a class and optional text; text goes through textContent, never HTML. */
function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function svg(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  return node;
}

function formatRate(value) {
  if (value >= 1000) return `${(value / 1000).toFixed(value >= 10000 ? 0 : 1)}k`;
  if (value >= 10 || Number.isInteger(value)) return String(Math.round(value));
  return value.toFixed(1);
}

function formatCount(value) {
  return value.toLocaleString('en-US');
}

/** A percentile from the histogram: below its first bound (0.1 ms) nothing finer is known. */
function formatLatency(ms, bucketMs) {
  if (ms === null) return '–';
  if (bucketMs !== null && bucketMs <= 0.1) return '< 0.1 ms';
  if (ms >= 1000) return '≥ 1 s';
  return ms >= 10 ? `${Math.round(ms)} ms` : `${ms.toFixed(2)} ms`;
}

function formatClock(ms) {
  return new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

function formatDuration(ms) {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

/** The average per second over the last `seconds` finished intervals (the last one is unfinished). */
function recentRate(values, seconds) {
  const finished = values.slice(0, -1).slice(-seconds);
  if (finished.length === 0) return values.length > 0 ? values[values.length - 1] : 0;
  return finished.reduce((a, b) => a + b, 0) / finished.length;
}

function sum(values) {
  return values.reduce((a, b) => a + b, 0);
}

/** A card's elements, made once and updated on every poll. */
function makeCard(policy) {
  const card = el('article', 'policy');
  card.dataset.policy = policy.name;
  const head = el('div', 'policy-head');
  head.append(el('h2', '', policy.name));
  const state = el('span', 'store-state');
  head.append(state);
  card.append(head, el('p', 'description', policy.description));
  const failure = el('p', 'failure');
  card.append(failure);
  // A concurrency policy's slots: in use now, and those of leases that lapsed unreleased.
  const slots = el('p', 'slots');
  slots.hidden = true;
  card.append(slots);
  const budget = el('p', 'budget');
  budget.hidden = true;
  card.append(budget);

  const stats = el('div', 'stats');
  const stat = (className, label) => {
    const box = el('div', `stat ${className}`);
    const value = el('span', 'value', '–');
    box.append(value, el('span', 'label', label));
    stats.append(box);
    return value;
  };
  const allowedRate = stat('allowed', 'allowed /s (10 s)');
  const deniedRate = stat('denied', 'denied /s (10 s)');
  const p50 = stat('p50', 'p50 store time');
  const p99 = stat('p99', 'p99 store time');
  card.append(stats);

  const chart = svg('svg', { class: 'chart', role: 'img' });
  chart.setAttribute('aria-label', `Allowed and denied decisions per second for ${policy.name}`);
  card.append(chart);
  const legend = el('div', 'legend');
  const allowedTotal = el('span', 'allowed');
  const deniedTotal = el('span', 'denied');
  const shadowTotal = el('span', 'shadow');
  legend.append(allowedTotal, deniedTotal, shadowTotal);
  card.append(legend);

  card.append(el('h3', '', 'Most denied, last 5 to 10 minutes'));
  const top = el('ol', 'top-denied');
  card.append(top);
  return {
    card,
    state,
    failure,
    slots,
    budget,
    allowedRate,
    deniedRate,
    p50,
    p99,
    chart,
    allowedTotal,
    deniedTotal,
    shadowTotal,
    top,
  };
}

/**
 * Draws `series` ([class, values per second]) as lines over the last five minutes, sized to the
 * chart's width on screen, on a scale of `unit` (e.g. "/s").
 */
function drawLines(chart, series, historySeconds, unit) {
  const width = Math.max(chart.clientWidth, 200);
  const height = CHART_HEIGHT;
  chart.setAttribute('viewBox', `0 0 ${width} ${height}`);
  const plotW = width - PAD.left - PAD.right;
  const plotH = height - PAD.top - PAD.bottom;
  const peak = Math.max(1, ...series.flatMap(([, values]) => values));
  // A round top for the scale: 1, 2 or 5 times a power of ten.
  const magnitude = 10 ** Math.floor(Math.log10(peak));
  const top = [1, 2, 5, 10].map((m) => m * magnitude).find((v) => v >= peak);
  const x = (i, n) => PAD.left + plotW * ((historySeconds - n + i) / (historySeconds - 1));
  const y = (v) => PAD.top + plotH * (1 - v / top);

  const nodes = [];
  for (const fraction of [0, 0.5, 1]) {
    const value = top * fraction;
    nodes.push(
      svg('line', { class: 'grid', x1: PAD.left, x2: width - PAD.right, y1: y(value), y2: y(value) }),
    );
    const label = svg('text', { x: PAD.left - 6, y: y(value) + 4, 'text-anchor': 'end' });
    label.textContent = `${formatRate(value)}${unit}`;
    nodes.push(label);
  }
  for (const minutes of [5, 4, 3, 2, 1, 0]) {
    const label = svg('text', {
      x: PAD.left + plotW * (1 - minutes / 5),
      y: height - 4,
      'text-anchor': minutes === 5 ? 'start' : minutes === 0 ? 'end' : 'middle',
    });
    label.textContent = minutes === 0 ? 'now' : width < 480 ? `−${minutes}m` : `−${minutes} min`;
    nodes.push(label);
  }
  for (const [name, values] of series) {
    if (name === 'shadow' && !values.some((v) => v > 0)) continue;
    const n = values.length;
    const d = values.map((v, i) => `${i === 0 ? 'M' : 'L'}${x(i, n).toFixed(1)},${y(v).toFixed(1)}`).join('');
    if (d !== '') nodes.push(svg('path', { class: `series ${name}`, d }));
  }
  chart.replaceChildren(...nodes);
}

/** A policy's allowed, denied and shadow-denied decisions per second. */
function drawChart(chart, policy, historySeconds) {
  const series = [
    ['allowed', policy.allowed],
    ['denied', policy.denied],
    ['shadow', policy.shadowDenied],
  ];
  drawLines(chart, series, historySeconds, '/s');
  chart.dataset.allowed = String(sum(policy.allowed));
  chart.dataset.denied = String(sum(policy.denied));
}

/** The overload guard: its limit and refusals now and over five minutes; hidden when it is off. */
function renderGuard(guard, historySeconds) {
  const section = document.getElementById('guard');
  section.hidden = guard === null;
  if (guard === null) return;
  const state = document.getElementById('guard-state');
  const refusing = recentRate(guard.refusedSeries, 10) > 0;
  state.dataset.overloaded = String(guard.overloaded || refusing);
  state.textContent = guard.overloaded
    ? 'overloaded: short waits, newest first'
    : refusing
      ? 'refusing calls past the limit'
      : 'taking every call';
  const { settings } = guard;
  document.getElementById('guard-settings').textContent =
    `The limit follows latency from ${formatCount(settings.min)} to ${formatCount(settings.max)} calls in flight; past it a call waits up to ${settings.burstMs} ms in a burst, ${settings.waitMs} ms under overload, then is refused (gRPC RESOURCE_EXHAUSTED, HTTP 503). Refused: ${formatCount(guard.refused.grpc)} gRPC, ${formatCount(guard.refused.http)} HTTP. Event loop behind by ${Math.round(guard.lagMs)} ms.`;
  document.getElementById('guard-limit').textContent = formatCount(guard.limit);
  document.getElementById('guard-in-flight').textContent =
    `${formatCount(guard.inFlight)} · ${formatCount(guard.queued)}`;
  document.getElementById('guard-refused-rate').textContent = formatRate(recentRate(guard.refusedSeries, 10));
  const total = guard.refused.grpc + guard.refused.http;
  document.getElementById('guard-refused-total').textContent = formatCount(total);
  const limitChart = document.getElementById('guard-limit-chart');
  drawLines(limitChart, [['limit', guard.limitSeries]], historySeconds, '');
  limitChart.dataset.limit = String(guard.limit);
  const refusedChart = document.getElementById('guard-refused-chart');
  drawLines(refusedChart, [['denied', guard.refusedSeries]], historySeconds, '/s');
  refusedChart.dataset.refused = String(sum(guard.refusedSeries));
}

/** A global budget in words: what this region holds and asks, and how its ledger calls fare. */
function budgetText(budget) {
  const region = `Region ${budget.region} of ${budget.regions.join(', ')}`;
  const tracked = `${formatCount(budget.identifiers)} identifier${budget.identifiers === 1 ? '' : 's'}`;
  const held =
    budget.kind === 'bucket'
      ? `leases ${formatCount(budget.granted)} of capacity beyond its floor for ${tracked}; the region asks ${formatCount(budget.demand)}/s`
      : `holds ${formatCount(budget.granted)} beyond its floor this window for ${tracked}; asked ${formatCount(budget.demand)} here`;
  const ledger = budget.ledgerUp
    ? `ledger ${budget.ledgerMs} ms`
    : 'ledger unreachable: deciding on what it holds';
  return `${region}: ${held} · ${ledger} · ${formatCount(budget.ledgerCalls)} calls, ${formatCount(budget.ledgerErrors)} failed`;
}

function renderPolicy(view, policy, data) {
  const up = policy.storeUp;
  view.state.dataset.up = String(up);
  const shards = policy.downShards.filter((shard) => shard !== '');
  view.state.textContent = up
    ? 'store up'
    : `store down${policy.downSinceMs === null ? '' : ` since ${formatClock(policy.downSinceMs)}`}${shards.length > 0 ? ` (${shards.join(', ')})` : ''}`;
  view.failure.textContent = `${up ? 'If the store fails, it' : 'Now it'} ${FAILURE_TEXT[policy.onStoreError] ?? policy.onStoreError} (onStoreError: ${policy.onStoreError}, timeout ${policy.timeoutMs} ms)${policy.enforced ? '' : ' · shadow mode: nothing is denied'}`;
  view.slots.hidden = policy.leases === null;
  if (policy.leases !== null) {
    const { slotsInUse, expiredUnreleased } = policy.leases;
    view.slots.textContent = `slots in use ${formatCount(slotsInUse)} of ${formatCount(policy.limit)} · refused ${formatCount(sum(policy.denied))} (5 min) · lapsed unreleased ${formatCount(expiredUnreleased)}`;
  }
  view.budget.hidden = policy.budget === null;
  if (policy.budget !== null) {
    view.budget.dataset.up = String(policy.budget.ledgerUp);
    view.budget.textContent = budgetText(policy.budget);
  }
  view.allowedRate.textContent = formatRate(recentRate(policy.allowed, 10));
  view.deniedRate.textContent = formatRate(
    recentRate(policy.denied, 10) + recentRate(policy.shadowDenied, 10),
  );
  view.p50.textContent = formatLatency(policy.p50Ms, policy.p50BucketMs);
  view.p99.textContent = formatLatency(policy.p99Ms, policy.p99BucketMs);
  drawChart(view.chart, policy, data.historySeconds);
  view.allowedTotal.textContent = `allowed ${formatCount(sum(policy.allowed))}`;
  view.deniedTotal.textContent = `denied ${formatCount(sum(policy.denied))}`;
  const shadow = sum(policy.shadowDenied);
  view.shadowTotal.textContent = shadow > 0 ? `shadow-denied ${formatCount(shadow)}` : '';
  view.shadowTotal.hidden = shadow === 0;

  const items = policy.topDenied.slice(0, TOP_SHOWN).map((entry) => {
    const item = el('li');
    item.append(el('span', 'identifier', entry.identifier));
    const count =
      entry.error > 0
        ? `${formatCount(entry.count)} (±${formatCount(entry.error)})`
        : formatCount(entry.count);
    item.append(el('span', 'count', count));
    return item;
  });
  if (items.length === 0) items.push(el('li', 'muted', 'no denials yet'));
  view.top.replaceChildren(...items);
}

/** JSON with each policy on one line: the config reads as a table. */
function compactJson(value, depth = 0) {
  if (depth >= 2 || value === null || typeof value !== 'object') return JSON.stringify(value);
  const indent = '  '.repeat(depth + 1);
  const entries = Array.isArray(value)
    ? value.map((item) => `${indent}${compactJson(item, depth + 1)}`)
    : Object.entries(value).map(
        ([key, item]) => `${indent}${JSON.stringify(key)}: ${compactJson(item, depth + 1)}`,
      );
  const [open, close] = Array.isArray(value) ? ['[', ']'] : ['{', '}'];
  return `${open}\n${entries.join(',\n')}\n${'  '.repeat(depth)}${close}`;
}

const views = new Map();
let lastConfig = '';

function render(data) {
  renderGuard(data.guard, data.historySeconds);
  const container = document.getElementById('policies');
  for (const policy of data.policies) {
    let view = views.get(policy.name);
    if (view === undefined) {
      view = makeCard(policy);
      views.set(policy.name, view);
      container.append(view.card);
    }
    renderPolicy(view, policy, data);
  }
  document.getElementById('store').textContent = `store: ${data.store}`;
  document.getElementById('uptime').textContent = `up ${formatDuration(data.nowMs - data.startedAtMs)}`;
  const config = compactJson(data.config);
  if (config !== lastConfig) {
    lastConfig = config;
    document.getElementById('config').textContent = config;
    document.getElementById('config-path').textContent =
      data.configPath === null ? 'the built-in configuration' : data.configPath;
  }
}

function setConnection(state, text) {
  const node = document.getElementById('connection');
  node.dataset.state = state;
  node.textContent = text;
}

async function poll() {
  try {
    const response = await fetch('/dashboard/data', { cache: 'no-store', credentials: 'same-origin' });
    if (response.ok) {
      const data = await response.json();
      render(data);
      setConnection('live', `live · ${formatClock(data.nowMs)}`);
    } else {
      setConnection('refused', `the service answered ${response.status}`);
    }
  } catch {
    setConnection('lost', 'service unreachable, retrying…');
  }
  setTimeout(poll, POLL_MS);
}

poll();
