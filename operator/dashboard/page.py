"""The dashboard page: one HTML document and one small script, both served by the app (no CDN).

The script fetches the JSON twins (/api/overview, /api/brokers, /api/topics,
/api/groups, /api/throughput) every REFRESH_MS and redraws the tables, a
canvas line chart of bytes in / out per second, and a timeline of each
group's rebalances coloured by cause. Cells carry `data-*`
attributes naming what they show, so a browser test can read the numbers
without parsing layout. Kept in Python strings so the package needs no
package-data entry.
"""

from __future__ import annotations

REFRESH_MS = 2000

INDEX_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>TinyStream dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
 header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:24px;align-items:baseline}
 header h1{font-size:18px;margin:0} header span{opacity:.8;font-size:13px}
 main{padding:12px 20px;display:grid;grid-template-columns:1fr 1fr;gap:16px}
 section{background:#fff;border-radius:6px;padding:10px 14px;box-shadow:0 1px 2px #0002}
 section.wide{grid-column:1/3} h2{font-size:15px;margin:4px 0 8px}
 table{border-collapse:collapse;width:100%;font-size:13px} th,td{padding:3px 8px;text-align:left;border-bottom:1px solid #eee}
 th{color:#667;font-weight:600} td.num{text-align:right;font-variant-numeric:tabular-nums}
 .cards{display:flex;gap:10px;flex-wrap:wrap} .card{background:#f0f3f8;border-radius:6px;padding:8px 12px;min-width:110px}
 .card b{display:block;font-size:22px} .card small{color:#667}
 .ok{color:#17803d} .bad{color:#b42318} .warn{color:#b54708} .muted{color:#99a}
 canvas{width:100%;height:180px}
</style></head>
<body>
<header><h1>TinyStream</h1><span id="cluster">cluster ?</span><span id="updated">loading…</span></header>
<main>
 <section class="wide"><h2>Cluster overview</h2><div class="cards" id="overview"></div></section>
 <section><h2>Brokers</h2><table id="brokers"></table></section>
 <section><h2>Throughput <small class="muted">(per second)</small></h2><canvas id="chart" width="640" height="180"></canvas>
  <div id="legend"><span style="color:#2563eb">■ bytes in</span> &nbsp; <span style="color:#dc6803">■ bytes out</span>
  &nbsp; <span class="muted" id="rate"></span></div></section>
 <section class="wide"><h2>Topics and partitions</h2><table id="partitions"></table></section>
 <section class="wide"><h2>Consumer groups</h2><table id="groups"></table></section>
 <section class="wide"><h2>Rebalances <small class="muted">(per group, over time)</small></h2>
  <canvas id="rebalances" width="1280" height="120"></canvas>
  <div id="causes"></div><table id="activity"></table></section>
</main>
<script src="dashboard.js"></script>
</body></html>
"""

DASHBOARD_JS = """'use strict';
const REFRESH_MS = %(refresh)d;
const esc = (v) => String(v ?? '–').replace(/[&<>"']/g, (c) => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
const num = (v) => (v === null || v === undefined) ? '–' : Number(v).toLocaleString('en-US');
const bytes = (v) => { if (v === null || v === undefined) return '–'; const u = ['B','KiB','MiB','GiB','TiB']; let i = 0;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; } return (i ? v.toFixed(1) : v) + ' ' + u[i]; };
const ms = (v) => (v === null || v === undefined) ? '–' : (v < 0 ? 'forever' : (v %% 86400000 === 0 ? v / 86400000 + ' d' : (v / 1000) + ' s'));
const cell = (text, attrs = '', cls = '') => `<td class="${cls}" ${attrs}>${text}</td>`;
const table = (id, head, rows) => { document.getElementById(id).innerHTML =
  '<tr>' + head.map((h) => `<th>${h}</th>`).join('') + '</tr>' + (rows.join('') || `<tr><td colspan="${head.length}" class="muted">none</td></tr>`); };
async function get(path) { const r = await fetch(path, {cache: 'no-store'}); if (!r.ok) throw new Error(path + ' ' + r.status); return r.json(); }

function drawOverview(o) {
  document.getElementById('cluster').textContent = `cluster ${o.cluster_id ?? '?'} · metadata v${o.metadata_version ?? '?'}`;
  const card = (label, value, key, cls = '') => `<div class="card"><b class="${cls}" data-overview="${key}">${value}</b><small>${label}</small></div>`;
  const c = o.controller;
  document.getElementById('overview').innerHTML = [
    card('controller', c.up ? 'up' : 'down', 'controller', c.up ? 'ok' : 'bad'),
    card('brokers up', `${o.brokers.up}/${o.brokers.total}`, 'brokers_up', o.brokers.up === o.brokers.total ? 'ok' : 'bad'),
    card('fenced', o.brokers.fenced, 'fenced', o.brokers.fenced ? 'bad' : 'ok'),
    card('topics', o.topics, 'topics'), card('partitions', o.partitions, 'partitions'),
    card('offline', o.offline_partitions, 'offline_partitions', o.offline_partitions ? 'bad' : 'ok'),
    card('under-replicated', o.under_replicated_partitions, 'under_replicated_partitions', o.under_replicated_partitions ? 'warn' : 'ok'),
    card('groups', o.groups, 'groups'), card('total lag', num(o.total_lag), 'total_lag', o.total_lag ? 'warn' : 'ok'),
  ].join('');
}

function drawBrokers(list) {
  table('brokers', ['id', 'address', 'rack', 'state', 'led', 'hosted', 'bytes in', 'bytes out'], list.map((b) => {
    const state = !b.up ? '<span class="bad">down</span>' : (b.fenced ? '<span class="bad">fenced</span>' : '<span class="ok">up</span>');
    return `<tr data-broker="${b.broker_id}">` + cell(b.broker_id) + cell(esc(b.address)) + cell(esc(b.rack)) + cell(state)
      + cell(b.partitions_led, 'data-field="partitions_led"', 'num') + cell(b.partitions, '', 'num')
      + cell(bytes(b.bytes_in), `data-field="bytes_in" data-value="${b.bytes_in ?? ''}"`, 'num')
      + cell(bytes(b.bytes_out), `data-field="bytes_out" data-value="${b.bytes_out ?? ''}"`, 'num') + '</tr>';
  }));
}

function drawTopics(list) {
  const rows = [];
  for (const t of list) {
    if (t.internal) continue;
    for (const p of t.partitions) {
      const cls = p.offline ? 'bad' : (p.under_replicated ? 'warn' : '');
      rows.push(`<tr class="${cls}" data-topic="${esc(t.name)}" data-partition="${p.partition}">` + cell(esc(t.name)) + cell(p.partition, '', 'num')
        + cell(p.offline ? 'none' : p.leader, 'data-field="leader"') + cell(p.replicas.join(', ')) + cell(p.isr.join(', '), 'data-field="isr"')
        + cell(p.leader_epoch, 'data-field="leader_epoch"', 'num') + cell(num(p.log_start_offset), 'data-field="log_start_offset"', 'num')
        + cell(num(p.log_end_offset), `data-field="log_end_offset" data-value="${p.log_end_offset ?? ''}"`, 'num')
        + cell(num(p.high_watermark), `data-field="high_watermark" data-value="${p.high_watermark ?? ''}"`, 'num')
        + cell(bytes(p.size_bytes), 'data-field="size_bytes"', 'num') + cell(num(p.segments), '', 'num')
        + cell(ms(p.retention_ms), '', 'num') + '</tr>');
    }
  }
  table('partitions', ['topic', 'partition', 'leader', 'replicas', 'ISR', 'epoch', 'log start', 'log end', 'HW', 'size', 'segments', 'retention'], rows);
}

function drawGroups(list) {
  const rows = [];
  for (const g of list) {
    const members = g.members.length;
    if (!g.offsets.length) rows.push(`<tr data-group="${esc(g.group_id)}">` + cell(esc(g.group_id)) + cell(esc(g.state)) + cell(members, '', 'num') + cell('–') + cell('') + cell('') + cell('') + cell('') + cell('') + '</tr>');
    for (const o of g.offsets) {
      const member = g.members.find((m) => m.member_id === o.member_id);
      rows.push(`<tr data-group="${esc(g.group_id)}" data-topic="${esc(o.topic)}" data-partition="${o.partition}">` + cell(esc(g.group_id)) + cell(esc(g.state))
        + cell(members, '', 'num') + cell(esc(o.topic)) + cell(o.partition, '', 'num')
        + cell(num(o.committed), `data-field="committed" data-value="${o.committed}"`, 'num')
        + cell(num(o.end_offset), 'data-field="end_offset"', 'num')
        + cell(num(o.lag), `data-field="lag" data-value="${o.lag ?? ''}"`, 'num ' + (o.lag ? 'warn' : 'ok'))
        + cell(member ? esc(member.client_id + ' ' + member.client_host) : '<span class="muted">unassigned</span>') + '</tr>');
    }
  }
  table('groups', ['group', 'state', 'members', 'topic', 'partition', 'committed', 'end', 'lag', 'owner'], rows);
}

const CAUSES = {join: '#2563eb', leave: '#dc6803', session_timeout: '#b42318', sync_timeout: '#7a2e9e', assignment_error: '#667'};

function drawActivity(list) {
  const groups = list.filter((g) => g.activity);
  table('activity', ['group', 'joins', 'leaves', 'expired', 'rebalances', 'by cause', 'commits', 'records committed'], groups.map((g) => {
    const a = g.activity, total = Object.values(a.rebalances).reduce((x, y) => x + y, 0);
    const causes = Object.entries(a.rebalances).filter(([, n]) => n).map(([c, n]) => `<span style="color:${CAUSES[c]}">${esc(c)} ${n}</span>`).join(' ');
    const field = (k, v) => cell(num(v), `data-field="${k}" data-value="${v}"`, 'num');
    return `<tr data-group="${esc(g.group_id)}">` + cell(esc(g.group_id)) + field('joins', a.joins) + field('leaves', a.leaves)
      + field('expirations', a.expirations) + field('rebalances', total) + cell(causes || '–') + field('commits', a.commits)
      + field('records_committed', a.records_committed) + '</tr>';
  }));
  document.getElementById('causes').innerHTML = Object.entries(CAUSES).map(([c, color]) => `<span style="color:${color}">● ${c}</span>`).join(' &nbsp; ');
  // The timeline: one lane per group, one dot per rebalance, over the span of the recorded history.
  const canvas = document.getElementById('rebalances'), ctx = canvas.getContext('2d');
  const lane = 22, left = 160, now = Date.now();
  canvas.width = canvas.clientWidth || canvas.width;  // draw at the size shown: no stretched text
  canvas.height = Math.max(60, lane * groups.length + 24); canvas.style.height = canvas.height + 'px';
  const W = canvas.width;
  ctx.clearRect(0, 0, W, canvas.height); ctx.font = '11px sans-serif';
  const times = groups.flatMap((g) => g.activity.rebalance_history.map((r) => r.at_ms));
  const start = Math.min(now - 60000, ...times), span = Math.max(now - start, 1);
  let marks = 0;
  groups.forEach((g, i) => {
    const y = 14 + i * lane;
    ctx.fillStyle = '#1d2330'; ctx.fillText(g.group_id.slice(0, 24), 0, y + 4);
    ctx.strokeStyle = '#e5e7eb'; ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(W, y); ctx.stroke();
    for (const r of g.activity.rebalance_history) {
      const x = left + (W - left - 8) * (r.at_ms - start) / span;
      ctx.fillStyle = CAUSES[r.cause] || '#000'; ctx.beginPath(); ctx.arc(x, y, 5, 0, 2 * Math.PI); ctx.fill(); marks++;
    }
  });
  ctx.fillStyle = '#667';
  ctx.fillText(new Date(start).toLocaleTimeString(), left, canvas.height - 4);
  ctx.fillText('now', W - 26, canvas.height - 4);
  canvas.dataset.marks = String(marks);
}

function drawChart(t) {
  const canvas = document.getElementById('chart');
  const ctx = canvas.getContext('2d');
  const W = canvas.width, H = canvas.height, pad = 34;
  ctx.clearRect(0, 0, W, H);
  const pts = t.points;
  const max = Math.max(1, ...pts.map((p) => Math.max(p.bytes_in, p.bytes_out)));
  ctx.strokeStyle = '#e5e7eb'; ctx.fillStyle = '#667'; ctx.font = '11px sans-serif';
  for (let i = 0; i <= 4; i++) { const y = pad / 2 + (H - pad) * i / 4; ctx.beginPath(); ctx.moveTo(pad, y); ctx.lineTo(W, y); ctx.stroke();
    ctx.fillText(bytes(Math.round(max * (4 - i) / 4)), 0, y + 4); }
  const line = (key, color) => { ctx.strokeStyle = color; ctx.lineWidth = 2; ctx.beginPath();
    pts.forEach((p, i) => { const x = pad + (W - pad) * (pts.length > 1 ? i / (pts.length - 1) : 1); const y = pad / 2 + (H - pad) * (1 - p[key] / max);
      i ? ctx.lineTo(x, y) : ctx.moveTo(x, y); }); ctx.stroke(); };
  line('bytes_in', '#2563eb'); line('bytes_out', '#dc6803');
  const last = pts[pts.length - 1];
  document.getElementById('rate').textContent = last ? `now: ${bytes(Math.round(last.bytes_in))}/s in, ${bytes(Math.round(last.bytes_out))}/s out, ${last.records_in.toFixed(1)} records/s` : 'collecting…';
}

async function refresh() {
  try {
    const [o, b, t, g, th] = await Promise.all(['overview', 'brokers', 'topics', 'groups', 'throughput'].map((v) => get('api/' + v)));
    drawOverview(o); drawBrokers(b.brokers); drawTopics(t.topics); drawGroups(g.groups); drawActivity(g.groups); drawChart(th);
    const el = document.getElementById('updated'); el.textContent = 'updated ' + new Date().toLocaleTimeString(); el.dataset.ready = '1';
  } catch (e) { document.getElementById('updated').textContent = 'error: ' + e.message; }
}
refresh(); setInterval(refresh, REFRESH_MS);
""" % {"refresh": REFRESH_MS}
