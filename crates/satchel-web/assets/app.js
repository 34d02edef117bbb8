// Satchel's web view: one page, routed by the URL's hash, reading the JSON
// endpoints under /api/. Text from the record is always set as text
// (textContent); only the server's `*_html` fields, which it renders from
// markdown with nothing active left in them, are set as HTML.
'use strict';

const main = () => document.getElementById('main');

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null) continue;
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = value;
    else if (key === 'html') node.innerHTML = value; // server-rendered, inert
    else if (key === 'style') node.style.cssText = value; // CSSOM: allowed by the CSP
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options,
    headers: { 'X-Satchel-Request': '1', ...(options.headers || {}) },
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function when(millis) {
  return millis ? new Date(millis).toLocaleString() : '';
}

function show(...nodes) {
  main().replaceChildren(...nodes.flat(Infinity).filter((node) => node !== null && node !== undefined));
}

function failed(error) {
  show(el('p', { class: 'error', text: `Cannot load: ${error.message}` }));
}

// Conversations --------------------------------------------------------

async function conversations(query) {
  const search = el('input', { type: 'search', placeholder: 'Search titles, goals and text', value: query || '', id: 'search' });
  const form = el('form', { class: 'search', onsubmit: (event) => {
    event.preventDefault();
    location.hash = `#/?q=${encodeURIComponent(search.value)}`;
  } }, search, el('button', { type: 'submit', text: 'Search' }));
  const data = await api(`/api/conversations${query ? `?q=${encodeURIComponent(query)}` : ''}`);
  const rows = data.conversations.map((c) => el('li', { class: 'conversation' },
    el('a', { href: `#/c/${encodeURIComponent(c.id)}`, text: c.title || 'Untitled conversation' }),
    el('div', { class: 'muted', text: `${when(c.updated_at)} · ${c.tool_calls} tool calls${c.matched ? ` · matched in ${c.matched}` : ''}` }),
    c.goal ? el('div', { class: 'goal', text: `Goal: ${c.goal}` }) : null));
  show(el('h1', { text: 'Conversations' }), form,
    rows.length ? el('ul', { class: 'list', id: 'conversations' }, rows) : el('p', { class: 'muted', text: 'Nothing recorded yet.' }));
}

function contextChart(usage) {
  const main = usage.filter((u) => u.purpose === 'main' || u.purpose === 'turn' || !u.purpose);
  const points = (main.length ? main : usage).map((u) => u.estimate_tokens);
  if (points.length < 2) return null;
  const width = 600, height = 120, max = Math.max(...points, 1);
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('class', 'chart');
  const line = document.createElementNS(ns, 'polyline');
  line.setAttribute('points', points.map((p, i) =>
    `${(i / (points.length - 1)) * width},${height - (p / max) * (height - 10)}`).join(' '));
  svg.append(line);
  const label = document.createElementNS(ns, 'text');
  label.setAttribute('x', 4); label.setAttribute('y', 14);
  label.textContent = `context, tokens (max ${max})`;
  svg.append(label);
  return svg;
}

async function conversation(id) {
  const data = await api(`/api/conversations/${encodeURIComponent(id)}`);
  const c = data.conversation;
  const mainEvents = [];
  const sides = new Map();
  for (const event of data.events) {
    let node;
    if (event.kind === 'tool_call') {
      node = el('section', { class: `event tool${event.is_error ? ' failed' : ''}` },
        el('div', { class: 'label', text: `#${event.n} ${event.tool}${event.error_code ? ` · ${event.error_code}` : ''} · ${event.duration_ms} ms` }),
        el('div', { class: 'md use', html: event.use_html }),
        el('div', { class: 'md result', html: event.result_html }));
    } else {
      node = el('section', { class: `event ${event.kind}` },
        el('div', { class: 'label', text: `#${event.n} ${event.kind}` }),
        el('div', { class: 'md', html: event.html }));
    }
    if (event.side) {
      if (!sides.has(event.side)) sides.set(event.side, []);
      sides.get(event.side).push(node);
    } else {
      mainEvents.push(node);
    }
  }
  const sideBlocks = [...sides.entries()].map(([side, nodes]) =>
    el('details', { class: 'side' }, el('summary', { text: `Side conversation: ${side} (${nodes.length})` }), nodes));
  const thinking = data.thinking.length
    ? el('details', { class: 'thinking' }, el('summary', { text: `Thinking (${data.thinking.length})` }),
      data.thinking.map((t) => el('pre', { text: t.text })))
    : null;
  const usageRows = data.usage.map((u) => el('tr', {},
    el('td', { text: String(u.statement ?? '') }), el('td', { text: String(u.turn ?? '') }),
    el('td', { text: u.purpose || '' }), el('td', { text: String(u.estimate_tokens) }),
    el('td', { text: u.input_tokens == null ? '—' : String(u.input_tokens) }),
    el('td', { text: u.output_tokens == null ? '—' : String(u.output_tokens) })));
  const usage = usageRows.length
    ? el('details', { class: 'usage' }, el('summary', { text: `Model calls (${usageRows.length}): estimate beside reported usage` }),
      contextChart(data.usage),
      el('table', {}, el('tr', {}, ['statement', 'turn', 'purpose', 'estimate', 'reported in', 'reported out'].map((h) => el('th', { text: h }))), usageRows))
    : null;
  const res = data.resources || { read: [], modified: [], fetched: [] };
  const resourceLists = [['Read', res.read], ['Modified', res.modified], ['Fetched', res.fetched]]
    .filter(([, items]) => items.length)
    .map(([label, items]) => el('div', {}, el('h3', { text: `${label} (${items.length})` }),
      el('ul', {}, items.map((item) => el('li', {}, el('code', { text: item }))))));
  const resources = resourceLists.length
    ? el('details', { class: 'resources', id: 'resources' },
      el('summary', { text: `Files and URLs: ${res.read.length} read, ${res.modified.length} modified, ${res.fetched.length} fetched` }),
      resourceLists)
    : null;
  show(el('h1', { text: c.title || 'Untitled conversation' }),
    el('div', { class: 'muted', text: `${c.id} · started ${when(c.created_at)} · updated ${when(c.updated_at)}` }),
    c.goal ? el('p', { class: 'goal', text: `Goal: ${c.goal}` }) : null,
    resources, usage, thinking, el('div', { id: 'events' }, mainEvents), sideBlocks, chatBox(c.id));
  follow(c.id, c.updated_at);
}

// Re-reads the conversation when it changes elsewhere (another tab, the
// REPL, Telegram), unless this tab is running a statement or the user is
// typing one.
let following = null;
function follow(id, updatedAt) {
  clearInterval(following);
  following = setInterval(async () => {
    if (!location.hash.startsWith(`#/c/${encodeURIComponent(id)}`)) {
      clearInterval(following);
      return;
    }
    if (running) return;
    const input = document.getElementById('chat-input');
    if (input && input.value) return;
    const latest = await api(`/api/conversations/${encodeURIComponent(id)}/updated`).catch(() => null);
    if (latest && latest.updated_at !== updatedAt) {
      clearInterval(following);
      route();
    }
  }, 1500);
}

// Chat -----------------------------------------------------------------

// A box that runs a statement in `conversationId` (null: a new one) and
// shows it as it happens: text, tool calls, consent questions, Stop.
// True while this tab runs a statement (the page then follows its own
// events instead of re-reading the conversation).
let running = false;

function chatBox(conversationId) {
  const input = el('textarea', { id: 'chat-input', rows: 3, placeholder: 'Say something to the model…' });
  const live = el('div', { id: 'live' });
  const stop = el('button', { id: 'stop', text: 'Stop', hidden: '' });
  const send = el('button', { id: 'send', text: 'Send' });
  let answer = null;
  const lines = new Map();
  send.addEventListener('click', async () => {
    const text = input.value.trim();
    if (!text) return;
    send.disabled = true;
    running = true;
    live.replaceChildren(el('div', { class: 'event user', text }));
    answer = el('div', { class: 'event assistant live-text' });
    live.append(answer);
    let run;
    try {
      ({ run } = await api('/api/chat', { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ conversation: conversationId, text }) }));
    } catch (error) {
      live.append(el('p', { class: 'error', text: error.message }));
      send.disabled = false;
      running = false;
      return;
    }
    input.value = '';
    stop.hidden = false;
    stop.onclick = () => api(`/api/chat/${run}/stop`, { method: 'POST' }).catch(() => {});
    const events = new EventSource(`/api/chat/${run}/events`);
    // A dropped connection is retried by the browser (it resumes after the
    // last event it had); one that cannot be made again frees the page.
    events.onerror = () => {
      if (events.readyState !== EventSource.CLOSED) return;
      stop.hidden = true;
      send.disabled = false;
      running = false;
      live.append(el('p', { class: 'error', text: 'Lost the connection to the answer; the conversation has what was recorded.' }));
    };
    events.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.type === 'text') {
        answer.textContent += event.text;
      } else if (event.type === 'tool_started') {
        const line = el('div', { class: 'tool-line', text: `⚙ ${event.tool}` });
        lines.set(event.call_id, line);
        live.insertBefore(line, answer);
      } else if (event.type === 'tool_finished') {
        const line = lines.get(event.call_id);
        if (line) line.textContent = `${event.is_error ? '✗' : '✓'} ${event.tool} · ${event.duration_ms} ms`;
      } else if (event.type === 'notice') {
        live.insertBefore(el('div', { class: 'muted', text: event.text }), answer);
      } else if (event.type === 'consent') {
        const box = el('div', { class: 'consent', id: `consent-${event.id}` },
          el('div', { text: `Allow ${event.tool}?` }),
          el('pre', { text: event.input && typeof event.input.command === 'string' ? event.input.command : JSON.stringify(event.input, null, 2) }),
          el('div', { class: 'muted', text: event.why }));
        for (const [answerName, label] of [['once', 'Allow once'], ['conversation', 'Allow in this conversation'], ['deny', 'Deny']]) {
          box.append(el('button', { class: `answer-${answerName}`, text: label, onclick: async () => {
            await api(`/api/chat/${run}/consent`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
              body: JSON.stringify({ id: event.id, answer: answerName }) }).catch(() => {});
            box.remove();
          } }));
        }
        live.insertBefore(box, answer);
      } else if (event.type === 'consent_answered') {
        const box = document.getElementById(`consent-${event.id}`);
        if (box) box.remove();
      } else if (event.type === 'done') {
        events.close();
        stop.hidden = true;
        send.disabled = false;
        running = false;
        const ended = { answered: null, turn_limit: 'The turn budget ran out.', stopped: 'Stopped.', failed: `Failed: ${event.error || ''}` }[event.outcome];
        live.append(el('div', { class: 'muted done', id: 'done', text: ended || 'Done.' }));
        if (event.conversation && event.conversation !== conversationId) {
          location.hash = `#/c/${encodeURIComponent(event.conversation)}`;
        } else if (event.outcome === 'answered') {
          route();
        }
      }
    };
  });
  return el('section', { class: 'chat' }, live, input, el('div', { class: 'chat-buttons' }, send, stop));
}

async function newChat() {
  show(el('h1', { text: 'New conversation' }), chatBox(null));
}

// Code -----------------------------------------------------------------

async function code() {
  const [stats, failures] = await Promise.all([api('/api/code/stats?days=7'), api('/api/code/failures?n=20')]);
  const s = stats.stats;
  const max = Math.max(1, ...s.languages.map((l) => l.total), ...s.categories.map((c) => c.count));
  const bar = (label, total, failedCount, note) => el('div', { class: 'bar' },
    el('span', { class: 'bar-label', text: label }),
    el('span', { class: 'bar-track' },
      el('span', { class: 'bar-ok', style: `width:${((total - failedCount) / max) * 100}%` }),
      el('span', { class: 'bar-failed', style: `width:${(failedCount / max) * 100}%` })),
    el('span', { class: 'muted', text: note }));
  show(el('h1', { text: 'Code executions' }),
    el('p', { text: `Last ${stats.days} days: ${s.total} runs, ${s.successes} ok, ${s.failures} failed; average ${s.average_ms} ms, p95 ${s.p95_ms} ms` }),
    el('h2', { text: 'By language' }), s.languages.map((l) => bar(l.language, l.total, l.failures, `${l.total} runs, ${l.failures} failed`)),
    s.categories.length ? el('h2', { text: 'Failures by category' }) : null,
    s.categories.map((c) => bar(c.category, c.count, c.count, `${c.count}`)),
    el('h2', { text: 'Latest failures' }),
    failures.failures.length ? failures.failures.map((f) => el('section', { class: 'event failed' },
      el('div', { class: 'label', text: `${f.summary.at} · ${f.summary.language} · ${f.summary.category}` }),
      el('pre', { text: f.code }), el('pre', { class: 'stderr', text: f.stderr || f.summary.error }))) : el('p', { class: 'muted', text: 'No failed runs.' }));
}

// Memory ---------------------------------------------------------------

async function memory(query, layer) {
  const params = new URLSearchParams();
  if (query) params.set('q', query);
  if (layer) params.set('layer', layer);
  const data = await api(`/api/memory?${params}`);
  const search = el('input', { type: 'search', placeholder: 'Recall…', value: query || '', id: 'memory-search' });
  const layers = el('select', { id: 'memory-layer' },
    ['', 'long', 'mid', 'short', 'session'].map((name) => el('option', { value: name, text: name || 'every layer' })));
  layers.value = layer || '';
  const form = el('form', { class: 'search', onsubmit: (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    if (search.value) next.set('q', search.value);
    if (layers.value) next.set('layer', layers.value);
    location.hash = `#/memory?${next}`;
  } }, search, layers, el('button', { type: 'submit', text: 'Recall' }));
  const stats = data.stats;
  const counts = Object.entries(stats.by_layer).map(([name, count]) => `${name} ${count}`).join(' · ');
  const rows = data.memories.map((item) => {
    const m = item.memory;
    const forget = el('button', { class: 'forget', text: 'Forget', onclick: async () => {
      if (!confirm(`Forget this memory?\n\n${m.content}`)) return;
      await api(`/api/memory/${encodeURIComponent(m.id)}`, { method: 'DELETE' });
      route();
    } });
    return el('li', { class: 'memory' }, el('div', { text: m.content }),
      el('div', { class: 'muted', text: `${m.layer}${m.category ? ` · ${m.category}` : ''}${item.relevance != null ? ` · relevance ${item.relevance.toFixed(2)}` : ''}` }), forget);
  });
  show(el('h1', { text: 'Memory' }),
    el('p', { text: `${stats.total} memories (${counts || 'none'}); ${stats.without_embedding} waiting for an embedding` }),
    form, data.semantic === false ? el('p', { class: 'muted', text: 'Recall used keywords only: the embedding model is not available.' }) : null,
    el('ul', { class: 'list', id: 'memories' }, rows));
}

// Audit ----------------------------------------------------------------

async function audit(params) {
  const query = new URLSearchParams(params);
  const data = await api(`/api/audit?${query}`);
  const field = (name, placeholder) => el('input', { name, placeholder, value: query.get(name) || '' });
  const failedBox = el('input', { type: 'checkbox', name: 'failed', value: 'true' });
  if (query.get('failed') === 'true') failedBox.checked = true;
  const form = el('form', { class: 'filters', onsubmit: (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const [key, value] of new FormData(form)) if (value) next.set(key, value);
    location.hash = `#/audit?${next}`;
  } }, field('tool', 'tool'), field('source', 'source (repl, run, mcp, telegram…)'), field('since', 'since (2h, 7d)'),
  el('label', {}, failedBox, ' failed only'), el('button', { type: 'submit', text: 'Filter' }));
  const rows = data.rows.map((r) => el('tr', { class: r.is_error ? 'failed' : '' },
    el('td', { text: when(r.started_at) }), el('td', { text: r.caller || r.source }), el('td', { text: r.tool }),
    el('td', { text: r.is_error ? `✗ ${r.error_code || ''}` : 'ok' }), el('td', { text: `${Math.round(r.duration_us / 1000)} ms` }),
    el('td', { class: 'input', text: JSON.stringify(r.input) })));
  show(el('h1', { text: 'Audit trail' }), form,
    el('table', { id: 'audit' }, el('tr', {}, ['started', 'source', 'tool', 'result', 'duration', 'input'].map((h) => el('th', { text: h }))), rows));
}

// Background processes -------------------------------------------------

async function processes() {
  const data = await api('/api/processes');
  const rows = data.processes.map((p) => {
    const kill = p.state === 'running' ? el('button', { class: 'forget', text: 'Kill', onclick: async () => {
      if (!confirm(`End ${p.process_id} and everything it started?\n\n${p.command}`)) return;
      await api(`/api/processes/${encodeURIComponent(p.process_id)}`, { method: 'DELETE' });
      route();
    } }) : null;
    return el('tr', {}, el('td', { text: p.process_id }), el('td', { text: String(p.pid) }),
      el('td', { text: p.state }), el('td', { text: `${p.age_secs} s` }), el('td', { text: String(p.unread_bytes) }),
      el('td', { text: p.conversation }), el('td', { class: 'input', text: p.command }), el('td', {}, kill));
  });
  show(el('h1', { text: 'Background processes' }),
    rows.length ? el('table', { id: 'processes' }, el('tr', {}, ['id', 'pid', 'state', 'age', 'unread', 'conversation', 'command', ''].map((h) => el('th', { text: h }))), rows)
      : el('p', { class: 'muted', text: 'None: a `bash` call with `background: true` starts one.' }));
}

// Routing --------------------------------------------------------------

function route() {
  const hash = location.hash.slice(1) || '/';
  const [path, search] = hash.split('?');
  const params = new URLSearchParams(search || '');
  let page;
  if (path.startsWith('/c/')) page = conversation(decodeURIComponent(path.slice(3)));
  else if (path === '/code') page = code();
  else if (path === '/chat') page = newChat();
  else if (path === '/memory') page = memory(params.get('q'), params.get('layer'));
  else if (path === '/audit') page = audit(params);
  else if (path === '/processes') page = processes();
  else page = conversations(params.get('q'));
  page.catch(failed);
}

window.addEventListener('hashchange', route);
route();
