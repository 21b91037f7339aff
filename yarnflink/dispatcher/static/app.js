// The yarnflink web dashboard: plain JavaScript over the Dispatcher's REST API (Flink's paths).
// Routes live in the URL hash; the current view re-renders every web.refresh-interval.
'use strict';

(function () {
  const content = document.getElementById('content');
  const errorBox = document.getElementById('error');
  const statusBox = document.getElementById('status');
  const TERMINAL = ['FINISHED', 'FAILED', 'CANCELED'];
  let config = { 'refresh-interval': 3000, features: { 'web-cancel': true } };
  let timer = null;
  let rendering = false;
  let renderSeq = 0;         // a render that finishes after a newer one started is dropped
  // A periodic refresh never replaces the page while a mouse button is down: a click whose
  // mousedown and mouseup land on two different (re-rendered) elements is lost by the browser.
  let pointerDown = false;
  let selectedVertex = {};   // job id -> vertex id shown in the subtask table

  // ------------------------------------------------------------------ helpers
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  const svg = (tag, attrs) => {
    const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    return el;
  };
  const enc = encodeURIComponent;

  async function api(path, options) {
    const resp = await fetch(path, Object.assign({ credentials: 'same-origin', headers: { accept: 'application/json' } }, options || {}));
    if (resp.status === 401) { location.reload(); throw new Error('not signed in'); }
    const type = resp.headers.get('content-type') || '';
    const body = type.includes('json') ? await resp.json() : await resp.text();
    if (!resp.ok) throw new Error((body && body.errors ? body.errors.join('; ') : String(body)) || resp.statusText);
    return body;
  }

  function fmtNum(x) {
    if (x === null || x === undefined || isNaN(x)) return '-';
    const a = Math.abs(x);
    if (a >= 1e9) return (x / 1e9).toFixed(2) + 'G';
    if (a >= 1e6) return (x / 1e6).toFixed(2) + 'M';
    if (a >= 1e4) return (x / 1e3).toFixed(1) + 'k';
    return Number.isInteger(x) ? String(x) : x.toFixed(1);
  }
  function fmtBytes(b) {
    if (b === null || b === undefined || b < 0 || isNaN(b)) return '-';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i === 0 ? b : b.toFixed(1)) + ' ' + u[i];
  }
  function fmtDuration(ms) {
    if (ms === null || ms === undefined || ms < 0) return '-';
    const s = Math.floor(ms / 1000), m = Math.floor(s / 60), hrs = Math.floor(m / 60);
    if (hrs > 0) return `${hrs}h ${m % 60}m`;
    if (m > 0) return `${m}m ${s % 60}s`;
    return ms < 1000 ? `${ms}ms` : `${s}s`;
  }
  const fmtTime = (ms) => (ms && ms > 0 ? new Date(ms).toLocaleString() : '-');
  const badge = (state) => h('span', { class: 'badge ' + state, text: state });
  function bpSpan(level, msPerSecond) {
    const pct = Math.round((msPerSecond || 0) / 10);
    return h('span', { class: 'bp-' + (level || 'ok') }, `${(level || 'ok').toUpperCase()} ${pct}%`);
  }
  const card = (label, value, id) => h('div', { class: 'card', id }, h('div', { class: 'label', text: label }),
    h('div', { class: 'value', text: value }));
  function table(headers, rows, attrs) {
    return h('table', attrs || {},
      h('thead', {}, h('tr', {}, headers.map((c) => h('th', { class: /^(#|Records|Bytes|Duration|Slots|Free|Size|Parallelism|Tasks)/.test(c) ? 'num' : null, text: c })))),
      h('tbody', {}, rows));
  }
  function tasksSummary(tasks) {
    return Object.entries(tasks || {}).filter(([k, v]) => v > 0 && k !== 'total')
      .map(([k, v]) => `${v} ${k.toLowerCase()}`).join(', ') || '-';
  }

  // ------------------------------------------------------------------ views
  async function viewOverview() {
    const [ov, jobs] = await Promise.all([api('/overview'), api('/jobs/overview')]);
    const running = jobs.jobs.filter((j) => !TERMINAL.includes(j.state));
    const done = jobs.jobs.filter((j) => TERMINAL.includes(j.state));
    return h('div', {},
      h('h1', { text: 'Cluster overview' }),
      h('div', { class: 'cards' },
        card('Task Managers', ov.taskmanagers, 'ov-taskmanagers'),
        card('Slots total', ov['slots-total'], 'ov-slots-total'),
        card('Slots free', ov['slots-available'], 'ov-slots-free'),
        card('Jobs running', ov['jobs-running'], 'ov-jobs-running'),
        card('Jobs finished', ov['jobs-finished'], 'ov-jobs-finished'),
        card('Jobs cancelled', ov['jobs-cancelled'], 'ov-jobs-cancelled'),
        card('Jobs failed', ov['jobs-failed'], 'ov-jobs-failed')),
      h('h2', { text: 'Running jobs' }), jobTable(running, 'running-jobs'),
      h('h2', { text: 'Completed jobs' }), jobTable(done, 'completed-jobs'));
  }

  function jobTable(jobs, id) {
    if (!jobs.length) return h('p', { class: 'muted', id, text: 'No jobs.' });
    jobs = jobs.slice().sort((a, b) => b['start-time'] - a['start-time']);
    return table(['Name', 'Start time', 'Duration', 'Tasks', 'Status'], jobs.map((j) =>
      h('tr', { class: 'clickable job-row', 'data-job-id': j.jid, onclick: () => { location.hash = '#/jobs/' + j.jid; } },
        h('td', {}, h('a', { href: '#/jobs/' + j.jid, text: j.name })),
        h('td', { text: fmtTime(j['start-time']) }),
        h('td', { class: 'num', text: fmtDuration(j.duration) }),
        h('td', { class: 'num', text: tasksSummary(j.tasks) }),
        h('td', {}, badge(j.state)))), { id });
  }

  async function viewJobs() {
    const jobs = await api('/jobs/overview');
    return h('div', {}, h('h1', { text: 'Jobs' }), jobTable(jobs.jobs, 'all-jobs'));
  }

  async function viewJob(jid, tab) {
    tab = tab || 'overview';
    const job = await api('/jobs/' + enc(jid));
    const cancellable = config.features['web-cancel'] && !TERMINAL.includes(job.state) && job.state !== 'CANCELLING';
    const header = h('div', { class: 'toolbar' },
      h('h1', { id: 'job-name', text: job.name }), badge(job.state),
      h('span', { class: 'muted', id: 'job-id', text: job.jid }),
      h('span', { class: 'spacer' }),
      h('span', { class: 'muted', text: `started ${fmtTime(job['start-time'])}, ${fmtDuration(job.duration)}` +
        (job.numRestarts !== undefined ? `, ${job.numRestarts} restart${job.numRestarts === 1 ? '' : 's'}` : '') }),
      cancellable ? h('button', { class: 'danger', id: 'cancel-job', onclick: () => cancelJob(job) }, 'Cancel job') : null);
    header.querySelector('.badge').id = 'job-state';
    const tabs = h('div', { class: 'tabs' }, [['overview', 'Overview'], ['exceptions', 'Exceptions'],
      ['checkpoints', 'Checkpoints'], ['configuration', 'Configuration']].map(([k, label]) =>
      h('a', { href: `#/jobs/${jid}/${k}`, class: tab === k ? 'active' : null, 'data-tab': k, text: label })));
    let body;
    if (tab === 'exceptions') body = await jobExceptions(jid);
    else if (tab === 'checkpoints') body = await jobCheckpoints(jid);
    else if (tab === 'configuration') body = await jobConfiguration(jid);
    else body = jobOverview(job);
    return h('div', {}, header, tabs, body);
  }

  async function cancelJob(job) {
    if (!window.confirm(`Cancel job ${job.name} (${job.jid})?`)) return;
    const button = document.getElementById('cancel-job');
    if (button) button.disabled = true;
    try {
      await api(`/jobs/${enc(job.jid)}?mode=cancel`, { method: 'PATCH' });
    } catch (e) {
      showError('Cancelling failed: ' + e.message);
    }
    refresh();
  }

  function jobOverview(job) {
    const vertices = job.vertices || [];
    if (!selectedVertex[job.jid] && vertices.length) selectedVertex[job.jid] = vertices[0].id;
    const selected = vertices.find((v) => v.id === selectedVertex[job.jid]);
    return h('div', {},
      drawGraph(job),
      h('h2', { text: 'Vertices' }),
      table(['Name', 'Status', 'Parallelism', 'Records in', 'Records out', 'Bytes in', 'Bytes out', 'Backpressure', 'Duration', 'Tasks'],
        vertices.map((v) => {
          const m = v.metrics || {};
          return h('tr', { class: 'clickable vertex-row' + (selected && v.id === selected.id ? ' selected' : ''), 'data-vertex-id': v.id,
            onclick: () => { selectedVertex[job.jid] = v.id; refresh(); } },
          h('td', { text: v.name }), h('td', {}, badge(v.status)),
          h('td', { class: 'num', text: v.parallelism }),
          h('td', { class: 'num', text: `${fmtNum(m['read-records'])} (${fmtNum(m['read-records-per-second'])}/s)` }),
          h('td', { class: 'num', text: `${fmtNum(m['write-records'])} (${fmtNum(m['write-records-per-second'])}/s)` }),
          h('td', { class: 'num', text: fmtBytes(m['read-bytes']) }),
          h('td', { class: 'num', text: fmtBytes(m['write-bytes']) }),
          h('td', {}, bpSpan(m['backpressure-level'], m['backpressured-time-ms-per-second'])),
          h('td', { class: 'num', text: fmtDuration(v.duration) }),
          h('td', { class: 'num', text: tasksSummary(v.tasks) }));
        }), { id: 'vertex-table' }),
      selected ? subtaskTable(selected) : null);
  }

  function subtaskTable(v) {
    return h('div', {},
      h('h2', { text: `Subtasks of ${v.name}` }),
      table(['#', 'Status', 'Attempt', 'Task Manager', 'Slot', 'Records in', 'Records out', 'Backpressure', 'Endpoint'],
        (v.subtasks || []).map((s) => {
          const m = s.metrics || {};
          return h('tr', { class: 'subtask-row', 'data-subtask': s.subtask },
            h('td', { class: 'num', text: s.subtask }), h('td', {}, badge(s.status)),
            h('td', { class: 'num', text: s.attempt }),
            h('td', {}, s['taskmanager-id'] ? h('a', { class: 'tm-link', href: '#/taskmanagers/' + enc(s['taskmanager-id']), text: s['taskmanager-id'] }) : '-'),
            h('td', { class: 'num slot', text: s.slot === null || s.slot === undefined ? '-' : s.slot }),
            h('td', { class: 'num', text: `${fmtNum(m['read-records'])} (${fmtNum(m['read-records-per-second'])}/s)` }),
            h('td', { class: 'num', text: `${fmtNum(m['write-records'])} (${fmtNum(m['write-records-per-second'])}/s)` }),
            h('td', {}, bpSpan(m['backpressure-level'], m['backpressured-time-ms-per-second'])),
            h('td', { class: 'muted', text: s.endpoint || '-' }));
        }), { id: 'subtask-table' }));
  }

  // The JobGraph: vertices in columns by their distance from the sources, edges between them.
  function drawGraph(job) {
    const W = 250, GAPX = 90, GAPY = 26, PAD = 20;
    const nodes = (job.plan && job.plan.nodes) || job.vertices.map((v) => ({ id: v.id, description: v.name }));
    const byId = Object.fromEntries(job.vertices.map((v) => [v.id, v]));
    const level = {};
    for (const n of nodes) level[n.id] = Math.max(0, ...(n.inputs || []).map((i) => (level[i.id] ?? 0) + 1));
    const columns = [];
    const pos = {};
    for (const n of nodes) (columns[level[n.id]] = columns[level[n.id]] || []).push(n);
    let height = 0;
    columns.forEach((col, c) => {
      let y = PAD;
      for (const n of col) {
        const v = byId[n.id] || {};
        const nodeH = 128 + 16 * ((v.operators || n.operators || []).length || 1);
        pos[n.id] = { x: PAD + c * (W + GAPX), y, h: nodeH };
        y += nodeH + GAPY;
      }
      height = Math.max(height, y);
    });
    const width = PAD * 2 + columns.length * (W + GAPX) - GAPX;
    const canvas = h('div', { class: 'graph-canvas', style: `width:${width}px;height:${height}px` });
    const edges = svg('svg', { width, height });
    const defs = svg('defs');
    const marker = svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto' });
    marker.appendChild(svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#8a94a0' }));
    defs.appendChild(marker);
    edges.appendChild(defs);
    for (const n of nodes) {
      for (const input of n.inputs || []) {
        const a = pos[input.id], b = pos[n.id];
        if (!a || !b) continue;
        const x1 = a.x + W, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y + b.h / 2;
        edges.appendChild(svg('path', { class: 'edge', 'data-from': input.id, 'data-to': n.id, 'marker-end': 'url(#arrow)',
          d: `M${x1},${y1} C${x1 + 45},${y1} ${x2 - 45},${y2} ${x2},${y2}` }));
        const label = svg('text', { class: 'edge-label', x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 5, 'text-anchor': 'middle' });
        label.textContent = input.ship_strategy;
        edges.appendChild(label);
      }
    }
    canvas.appendChild(edges);
    for (const n of nodes) {
      const v = byId[n.id] || { name: n.description, status: 'CREATED', parallelism: n.parallelism };
      const m = v.metrics || {};
      const p = pos[n.id];
      canvas.appendChild(h('div', {
        class: `vertex st-${v.status}` + (selectedVertex[job.jid] === n.id ? ' selected' : ''),
        style: `left:${p.x}px;top:${p.y}px;height:${p.h}px`, 'data-vertex-id': n.id,
        onclick: () => { selectedVertex[job.jid] = n.id; refresh(); },
      },
      h('div', { class: 'vname', title: v.name, text: v.name }),
      h('ul', { class: 'ops' }, (v.operators || n.operators || [v.name]).map((op) => h('li', { class: 'op', title: op, text: op }))),
      h('div', { class: 'row' }, h('span', { text: 'Parallelism' }), h('b', { class: 'parallelism', text: v.parallelism })),
      h('div', { class: 'row' }, h('span', { text: 'Status' }), h('span', { class: 'vstatus' }, badge(v.status))),
      h('div', { class: 'row' }, h('span', { text: 'Records in' }),
        h('span', { class: 'records-in', text: `${fmtNum(m['read-records'])} · ${fmtNum(m['read-records-per-second'])}/s` })),
      h('div', { class: 'row' }, h('span', { text: 'Records out' }),
        h('span', { class: 'records-out', text: `${fmtNum(m['write-records'])} · ${fmtNum(m['write-records-per-second'])}/s` })),
      h('div', { class: 'row' }, h('span', { text: 'Backpressure' }),
        h('span', { class: 'backpressure' }, bpSpan(m['backpressure-level'], m['backpressured-time-ms-per-second'])))));
    }
    return h('div', { class: 'graph', id: 'job-graph' }, canvas);
  }

  async function jobExceptions(jid) {
    const ex = await api(`/jobs/${enc(jid)}/exceptions`);
    const entries = (ex.exceptionHistory && ex.exceptionHistory.entries) || [];
    if (!entries.length) return h('p', { class: 'muted', id: 'exceptions', text: 'No exceptions.' });
    return h('div', { id: 'exceptions' }, entries.map((e) => h('div', { class: 'exception' },
      h('h2', { text: `${e.exceptionName} — ${fmtTime(e.timestamp)}` }),
      h('p', { class: 'muted', text: [e.taskName, e.taskManagerId && `on ${e.taskManagerId}`].filter(Boolean).join(' ') }),
      h('pre', { class: 'trace', text: e.stacktrace }))));
  }

  async function jobCheckpoints(jid) {
    const cp = await api(`/jobs/${enc(jid)}/checkpoints`);
    const c = cp.counts || {};
    const latest = (cp.latest && cp.latest.completed) || null;
    return h('div', { id: 'checkpoints' },
      h('div', { class: 'cards' }, card('Completed', c.completed || 0), card('In progress', c.in_progress || 0),
        card('Failed', c.failed || 0), card('Restored', c.restored || 0),
        card('Latest', latest ? `#${latest.id}` : 'none')),
      h('h2', { text: 'History' }),
      (cp.history || []).length
        ? table(['ID', 'Status', 'Triggered', 'Duration', 'Checkpointed size'], cp.history.map((e) => h('tr', { class: 'checkpoint-row' },
          h('td', { text: e.id }), h('td', {}, badge(e.status)), h('td', { text: fmtTime(e.trigger_timestamp) }),
          h('td', { class: 'num', text: fmtDuration(e.end_to_end_duration) }),
          h('td', { class: 'num', text: fmtBytes(e.checkpointed_size ?? e.state_size) }))), { id: 'checkpoint-history' })
        : h('p', { class: 'muted', id: 'checkpoint-history', text: 'No checkpoints yet.' }));
  }

  async function jobConfiguration(jid) {
    const c = await api(`/jobs/${enc(jid)}/config`);
    const ec = c['execution-config'] || {};
    const rows = [['Execution mode', ec['execution-mode']], ['Restart strategy', ec['restart-strategy']],
      ['Job parallelism', ec['job-parallelism']], ['Object reuse', String(ec['object-reuse-mode'])]];
    const user = Object.entries(ec['user-config'] || {}).sort();
    return h('div', { id: 'job-config' },
      h('table', { class: 'kv' }, h('tbody', {}, rows.map(([k, v]) => h('tr', {}, h('td', { text: k }), h('td', { text: v }))))),
      h('h2', { text: 'Job configuration' }),
      user.length ? h('table', { class: 'kv' }, h('tbody', {}, user.map(([k, v]) => h('tr', {}, h('td', { text: k }), h('td', { text: v })))))
        : h('p', { class: 'muted', text: 'None set.' }));
  }

  async function viewTaskManagers() {
    const tms = (await api('/taskmanagers')).taskmanagers;
    return h('div', {}, h('h1', { text: 'Task Managers' }),
      table(['ID', 'Address', 'Slots', 'Free', 'Last heartbeat', 'PID'], tms.map((tm) =>
        h('tr', { class: 'clickable tm-row', 'data-tm-id': tm.id, onclick: () => { location.hash = '#/taskmanagers/' + enc(tm.id); } },
          h('td', {}, h('a', { href: '#/taskmanagers/' + enc(tm.id), text: tm.id })),
          h('td', { text: tm.path || '-' }),
          h('td', { class: 'num', text: tm.slotsNumber }), h('td', { class: 'num', text: tm.freeSlots }),
          h('td', { text: tm.timeSinceLastHeartbeat === undefined ? '-' : fmtDuration(tm.timeSinceLastHeartbeat) + ' ago' }),
          h('td', { text: (tm.hardware && tm.hardware.pid) || '-' }))), { id: 'tm-table' }));
  }

  async function viewTaskManager(id) {
    const tm = await api('/taskmanagers/' + enc(id));
    const m = tm.metrics || {};
    const meter = (ratio) => h('span', { class: 'meter' }, h('i', { style: `width:${Math.round(Math.min(1, ratio || 0) * 100)}%` }));
    return h('div', {},
      h('h1', { id: 'tm-id', text: 'Task Manager ' + tm.id }),
      h('div', { class: 'cards' },
        card('Slots', tm.slotsNumber, 'tm-slots'), card('Free slots', tm.freeSlots, 'tm-free-slots'),
        card('Memory (RSS)', fmtBytes(m.rss), 'tm-rss'), card('Arrow memory', fmtBytes(m.arrowAllocated), 'tm-arrow'),
        card('Shuffle buffers', fmtBytes(m.shuffleMemoryUsed), 'tm-shuffle'),
        h('div', { class: 'card', id: 'tm-cpu' }, h('div', { class: 'label', text: 'CPU load' }),
          h('div', { class: 'value' }, `${Math.round((m.cpuLoad || 0) * 100)}%`, meter(m.cpuLoad))),
        card('Threads', m.threads, 'tm-threads')),
      h('h2', { text: 'Slots' }),
      table(['Slot', 'Job', 'Task', 'Status', 'Records in', 'Records out', 'Backpressure'], (tm.slots || []).flatMap((s) => {
        const tasks = s.tasks || [];
        const first = h('td', { rowspan: Math.max(1, tasks.length), text: `#${s.index}` + (s.allocationId ? '' : ' (free)') });
        const job = () => (s.jobId ? h('a', { href: '#/jobs/' + s.jobId, text: s.jobId.slice(0, 8) }) : '-');
        if (!tasks.length) return [h('tr', { class: 'slot-row', 'data-slot': s.index }, first, h('td', {}, job()), h('td', { class: 'muted', colspan: 5, text: 'no task' }))];
        return tasks.map((t, i) => {
          const tm2 = t.metrics || {};
          return h('tr', { class: 'slot-row task-in-slot', 'data-slot': s.index },
            i === 0 ? first : null, h('td', {}, job()),
            h('td', { text: t['task-name'] }), h('td', {}, badge(t.status)),
            h('td', { class: 'num', text: `${fmtNum(tm2.numRecordsIn)} (${fmtNum(tm2.numRecordsInPerSecond)}/s)` }),
            h('td', { class: 'num', text: `${fmtNum(tm2.numRecordsOut)} (${fmtNum(tm2.numRecordsOutPerSecond)}/s)` }),
            h('td', { text: `${Math.round((tm2.backPressuredTimeMsPerSecond || 0) / 10)}%` }));
        });
      }), { id: 'tm-slot-table' }),
      h('h2', { text: 'Details' }),
      h('table', { class: 'kv' }, h('tbody', {},
        [['Address', tm.path], ['Data port', tm.dataPort], ['Host', tm.hardware && tm.hardware.host],
          ['PID', tm.hardware && tm.hardware.pid], ['CPU cores', m.cpuCores], ['Virtual memory', fmtBytes(m.vms)],
          ['Garbage collections', (m.garbageCollectors || []).map((g) => `${g.name}: ${g.count}`).join(', ')],
          ['Prometheus', (tm.metricReporters && tm.metricReporters.prom) || 'off']]
          .map(([k, v]) => h('tr', {}, h('td', { text: k }), h('td', { text: v ?? '-' }))))),
      h('h2', { text: 'Logs' }), logList(tm.logs || [], (name) => `#/taskmanagers/${enc(tm.id)}/logs/${enc(name)}`));
  }

  function logList(logs, href) {
    if (!logs.length) return h('p', { class: 'muted', text: 'No log files.' });
    return table(['Name', 'Size', 'Modified'], logs.map((l) => h('tr', { class: 'log-row' },
      h('td', {}, h('a', { href: href(l.name), text: l.name })), h('td', { class: 'num', text: fmtBytes(l.size) }),
      h('td', { text: fmtTime(l.mtime) }))), { id: 'log-table' });
  }

  async function viewLog(title, path, back) {
    const text = await api(path);
    return h('div', {}, h('div', { class: 'toolbar' }, h('h1', { text: title }), h('span', { class: 'spacer' }),
      h('a', { href: back, text: 'back' }), h('button', { onclick: () => render() }, 'Reload')),
    h('pre', { class: 'log', id: 'log-content', text }));
  }

  async function viewJobManager(tab) {
    tab = tab || 'config';
    const tabs = h('div', { class: 'tabs' }, [['config', 'Configuration'], ['metrics', 'Metrics'], ['logs', 'Logs']].map(([k, label]) =>
      h('a', { href: '#/jobmanager/' + k, class: tab === k ? 'active' : null, text: label })));
    let body;
    if (tab === 'logs') {
      body = logList((await api('/jobmanager/logs')).logs, (name) => '#/jobmanager/logs/' + enc(name));
    } else if (tab === 'metrics') {
      const ids = (await api('/jobmanager/metrics')).map((x) => x.id);
      const values = await api('/jobmanager/metrics?get=' + ids.map(enc).join(','));
      body = h('table', { class: 'kv', id: 'jm-metrics' }, h('tbody', {}, values.map((x) => h('tr', {}, h('td', { text: x.id }),
        h('td', { text: /Memory|Arrow/.test(x.id) ? fmtBytes(Number(x.value)) : x.value })))));
    } else {
      const conf = await api('/jobmanager/config');
      body = h('table', { class: 'kv', id: 'jm-config' }, h('tbody', {}, conf.map((e) => h('tr', {}, h('td', { text: e.key }), h('td', { text: e.value })))));
    }
    return h('div', {}, h('h1', { text: 'Job Manager' }), tabs, body);
  }

  // ------------------------------------------------------------------ routing and refresh
  function route() {
    const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
    const [a, b, c, d] = parts;
    if (a === 'jobs' && b) return { nav: 'jobs', render: () => viewJob(b, c) };
    if (a === 'jobs') return { nav: 'jobs', render: viewJobs };
    if (a === 'taskmanagers' && b && c === 'logs' && d) {
      return { nav: 'taskmanagers', log: true, render: () => viewLog(`${d} of ${b}`, `/taskmanagers/${enc(b)}/logs/${enc(d)}`, '#/taskmanagers/' + enc(b)) };
    }
    if (a === 'taskmanagers' && b) return { nav: 'taskmanagers', render: () => viewTaskManager(b) };
    if (a === 'taskmanagers') return { nav: 'taskmanagers', render: viewTaskManagers };
    if (a === 'jobmanager' && b === 'logs' && c) {
      return { nav: 'jobmanager', log: true, render: () => viewLog(c, '/jobmanager/logs/' + enc(c), '#/jobmanager/logs') };
    }
    if (a === 'jobmanager') return { nav: 'jobmanager', render: () => viewJobManager(b) };
    return { nav: 'overview', render: viewOverview };
  }

  function showError(message) {
    errorBox.textContent = message;
    errorBox.hidden = !message;
  }

  async function render(isRefresh = false) {
    const r = route();
    for (const a of document.querySelectorAll('header nav a')) a.classList.toggle('active', a.dataset.nav === r.nav);
    rendering = true;
    const seq = ++renderSeq;
    try {
      const node = await r.render();
      if (seq !== renderSeq) return;
      if (isRefresh && pointerDown) return;  // the next refresh shows it; the click goes through
      const scroll = [window.scrollX, window.scrollY];
      const graph = content.querySelector('.graph');
      const graphScroll = graph ? [graph.scrollLeft, graph.scrollTop] : null;
      content.replaceChildren(node);
      window.scrollTo(scroll[0], scroll[1]);
      const newGraph = content.querySelector('.graph');
      if (graphScroll && newGraph) { newGraph.scrollLeft = graphScroll[0]; newGraph.scrollTop = graphScroll[1]; }
      showError('');
      statusBox.textContent = 'updated ' + new Date().toLocaleTimeString();
    } catch (e) {
      if (seq === renderSeq) showError(e.message);
    } finally {
      if (seq === renderSeq) rendering = false;
    }
  }

  const refresh = () => render();

  function schedule() {
    if (timer) clearInterval(timer);
    timer = setInterval(() => {
      if (document.hidden || rendering || pointerDown || route().log) return;
      render(true);
    }, Math.max(500, Number(config['refresh-interval']) || 3000));
  }

  window.addEventListener('hashchange', () => render());
  document.addEventListener('mousedown', () => { pointerDown = true; }, true);
  // cleared after the click event (dispatched right after mouseup) has been handled
  document.addEventListener('mouseup', () => setTimeout(() => { pointerDown = false; }, 0), true);
  window.addEventListener('blur', () => { pointerDown = false; });
  api('/config').then((c) => { config = c; }).catch(() => {}).finally(() => { schedule(); render(); });
})();
