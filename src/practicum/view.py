"""``practicum view RUN``: a local web page over a run's store.

One page (no build step, no JavaScript framework, no CDN: it works offline) served by the
standard library's HTTP server on 127.0.0.1, reading the run's SQLite store read-only on each
request, so a run still training can be watched. It shows the run, per-domain curves over steps
(training reward, held-out score), and the episode list with filters - domain, kind (train /
eval), and failed (the model's fault), errored (infrastructure), hack-flagged (verifier flags),
recovered (met a tool error or failing test, then succeeded), dropped (kept out of training,
with the reason). An episode opens turn by turn: the model's replies with their tool calls, the
observations, the score and its components, the verifier flags, the lifecycle transitions from
the store's events, the workspace diff of a terminal task and the render of a 3D task.

JSON endpoints, for scripts: ``/api/run``, ``/api/curves``, ``/api/episodes?domain=&kind=&status=``,
``/api/episode/ID``, ``/api/file?path=`` (only files inside the run folder).
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from practicum.eval_metrics import met_trouble
from practicum.records import Episode, EpisodeState

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
STATUSES = ("all", "failed", "errored", "hack", "recovered", "dropped")
INFRA = ("environment", "verifier", "engine")


def _connect(store: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{store}?mode=ro", uri=True, check_same_thread=False)


def status_of(ep: Episode, group_state: str, success: float = 1.0) -> set[str]:
    """The filters an episode matches."""
    out = set()
    infra = any(e.kind in INFRA for e in ep.errors) and not ep.trainable
    if infra:
        out.add("errored")
    elif ep.score is None or ep.score.value < success:
        out.add("failed")
    if ep.info.flags:
        out.add("hack")
    if not infra and ep.score is not None and ep.score.value >= success and met_trouble(ep):
        out.add("recovered")
    if group_state == "dropped" or ep.state == EpisodeState.dropped:
        out.add("dropped")
    return out


class RunView:
    """What the page reads: a run folder's store, read-only."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.store = self.run_dir / "store.sqlite"
        if not self.store.is_file():
            raise FileNotFoundError(f"{self.run_dir} holds no run (no store.sqlite)")

    def run(self) -> dict[str, Any]:
        with _connect(self.store) as db:
            meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
            counts = dict(db.execute("SELECT kind, COUNT(*) FROM groups GROUP BY kind").fetchall())
            domains = [d for (d,) in db.execute("SELECT DISTINCT domain FROM groups ORDER BY domain")]
            steps = db.execute("SELECT MAX(step) FROM metrics WHERE kind = 'train'").fetchone()[0]
        cfg = meta.get("config") or {}
        return {"dir": str(self.run_dir), "name": (cfg.get("run") or {}).get("name", self.run_dir.name),
                "model": (cfg.get("model") or {}).get("name"), "domains": domains, "groups": counts, "steps": steps or 0}

    def curves(self) -> dict[str, Any]:
        """Per domain: training reward by step, held-out score by step."""
        out: dict[str, dict[str, list[list[float]]]] = {}
        with _connect(self.store) as db:
            for step, kind, j in db.execute("SELECT step, kind, json FROM metrics ORDER BY rowid"):
                values = json.loads(j)
                for k, v in values.items():
                    if not isinstance(v, (int, float)):
                        continue
                    domain, _, name = k.rpartition("/")
                    if domain and name == "reward":
                        out.setdefault(domain, {}).setdefault(kind, []).append([step, float(v)])
        return out

    def episodes(self, domain: str = "", kind: str = "", status: str = "all", limit: int = 500) -> list[dict[str, Any]]:
        if status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}")
        q = ("SELECT e.json, g.id, g.step, g.kind, g.state FROM episodes e JOIN groups g ON e.group_id = g.id WHERE 1=1")
        args: list[Any] = []
        if domain:
            q += " AND e.domain = ?"
            args.append(domain)
        if kind:
            q += " AND g.kind = ?"
            args.append(kind)
        out = []
        with _connect(self.store) as db:
            for j, gid, step, gkind, gstate in db.execute(q + " ORDER BY g.step, e.rowid", args):
                ep = Episode.model_validate_json(j)
                st = status_of(ep, gstate)
                if status != "all" and status not in st:
                    continue
                out.append({"id": ep.id, "group": gid, "step": step, "kind": gkind, "domain": ep.domain, "task": ep.task_id,
                            "reward": ep.reward, "state": ep.state.value, "turns": len(ep.turns), "status": sorted(st),
                            "flags": ep.info.flags, "end": ep.info.end_reason, "attempt": ep.attempt})
                if len(out) >= limit:
                    break
        return out

    def episode(self, episode_id: str) -> dict[str, Any]:
        with _connect(self.store) as db:
            row = db.execute("SELECT e.json, g.id, g.step, g.kind, g.state FROM episodes e JOIN groups g "
                             "ON e.group_id = g.id WHERE e.id = ?", (episode_id,)).fetchone()
            if row is None:
                raise KeyError(episode_id)
            j, gid, step, kind, gstate = row
            events = [{"time": t, "entity": ent, "state": s, "reason": r, "version": v}
                      for t, ent, eid, _g, s, r, _st, v in db.execute("SELECT * FROM events WHERE group_id = ? ORDER BY rowid", (gid,))
                      if eid in (episode_id, gid)]
        ep = Episode.model_validate_json(j)
        turns = []
        for m in ep.messages:
            entry: dict[str, Any] = {"role": m.role, "content": m.content}
            if m.role == "assistant":
                entry["tool_calls"] = [_call(c) for c in TOOL_CALL.findall(m.content)]
            turns.append(entry)
        extra = ep.info.extra
        render = extra.get("render")
        return {"id": ep.id, "group": gid, "step": step, "kind": kind, "group_state": gstate, "domain": ep.domain,
                "task": ep.task_id, "state": ep.state.value, "reason": ep.reason, "attempt": ep.attempt,
                "score": None if ep.score is None else {"value": ep.score.value, "components": ep.score.components,
                                                        "explanation": ep.score.explanation},
                "flags": ep.info.flags, "end": ep.info.end_reason, "errors": [e.model_dump() for e in ep.errors],
                "tool_calls": ep.info.tool_calls, "tool_errors": ep.info.tool_errors, "messages": turns,
                "events": events, "diff": extra.get("git_diff"), "render": render if isinstance(render, str) else None,
                "status": sorted(status_of(ep, gstate)), "seconds": ep.seconds,
                "sandbox": {"cpu_s": ep.info.sandbox_cpu_s, "runs": ep.info.sandbox_runs}}

    def file(self, path: str) -> Path:
        p = (self.run_dir / path).resolve() if not Path(path).is_absolute() else Path(path).resolve()
        if self.run_dir not in p.parents or not p.is_file():
            raise PermissionError(path)
        return p


def _call(raw: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
        return {"name": obj.get("name"), "arguments": obj.get("arguments")}
    except (json.JSONDecodeError, AttributeError):
        return {"name": None, "raw": raw}


def make_server(view: RunView, host: str = "127.0.0.1", port: int = 8765) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, obj: Any, status: int = 200) -> None:
            self._send(status, json.dumps(obj).encode(), "application/json")

        def do_GET(self) -> None:  # noqa: N802 - the http.server name
            url = urlparse(self.path)
            q = {k: v[-1] for k, v in parse_qs(url.query).items()}
            try:
                if url.path in ("/", "/index.html"):
                    self._send(200, PAGE.encode(), "text/html; charset=utf-8")
                elif url.path == "/api/run":
                    self._json(view.run())
                elif url.path == "/api/curves":
                    self._json(view.curves())
                elif url.path == "/api/episodes":
                    self._json(view.episodes(q.get("domain", ""), q.get("kind", ""), q.get("status", "all"),
                                             int(q.get("limit", "500"))))
                elif url.path.startswith("/api/episode/"):
                    self._json(view.episode(url.path.rsplit("/", 1)[1]))
                elif url.path == "/api/file":
                    p = view.file(q.get("path", ""))
                    ctype = "image/png" if p.suffix == ".png" else "application/octet-stream"
                    self._send(200, p.read_bytes(), ctype)
                else:
                    self._json({"error": f"no such page: {url.path}"}, 404)
            except KeyError as e:
                self._json({"error": f"no episode {e}"}, 404)
            except (ValueError, PermissionError) as e:
                self._json({"error": str(e)}, 400)

    return ThreadingHTTPServer((host, port), Handler)


def serve_in_thread(view: RunView, host: str = "127.0.0.1", port: int = 0) -> tuple[ThreadingHTTPServer, str]:
    server = make_server(view, host, port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://{host}:{server.server_address[1]}/"


PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Practicum run</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 18px} header b{font-size:16px}
main{display:grid;grid-template-columns:minmax(420px,1fr) 1.3fr;gap:14px;padding:14px}
section{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:10px 12px;overflow:auto}
h2{font-size:14px;margin:2px 0 8px} table{border-collapse:collapse;width:100%} td,th{padding:3px 6px;border-bottom:1px solid #eef0f3;text-align:left;font-size:13px}
tr.ep:hover{background:#eef4ff;cursor:pointer} .tag{display:inline-block;padding:0 5px;border-radius:3px;font-size:11px;margin-right:3px;background:#e4e7ec}
.failed{background:#fde2e1}.errored{background:#fff0c2}.hack{background:#f4d4ff}.recovered{background:#d8f5dd}.dropped{background:#ddd}
.msg{border-left:3px solid #c9d1dc;margin:6px 0;padding:4px 8px;white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:12px}
.assistant{border-color:#3b6fd8}.tool{border-color:#c08a00}.user{border-color:#6b7480}.system{border-color:#aaa;color:#555}
.call{background:#eef4ff;border:1px solid #c7d7f7;border-radius:4px;padding:2px 6px;margin:3px 0;display:block}
.curves{display:flex;flex-wrap:wrap;gap:10px} .curve{font-size:12px} svg{background:#fbfcfd;border:1px solid #e3e6ea}
select{margin-right:8px} pre{white-space:pre-wrap;font-size:12px;background:#f3f4f6;padding:6px}
</style></head><body>
<header><b id="title">Practicum</b> <span id="sub"></span></header>
<main>
<div>
<section><h2>Curves</h2><div class="curves" id="curves"></div></section>
<section style="margin-top:14px"><h2>Episodes</h2>
<div><select id="f-domain"><option value="">all domains</option></select>
<select id="f-kind"><option value="">train and eval</option><option>train</option><option>eval</option></select>
<select id="f-status"><option>all</option><option>failed</option><option>errored</option><option>hack</option><option>recovered</option><option>dropped</option></select>
<span id="count"></span></div>
<table><thead><tr><th>step</th><th>kind</th><th>domain</th><th>task</th><th>reward</th><th>turns</th><th>status</th></tr></thead><tbody id="episodes"></tbody></table>
</section></div>
<section id="detail"><h2>Episode</h2><p>Choose an episode.</p></section>
</main>
<script>
const $=s=>document.querySelector(s), esc=t=>String(t??'').replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
async function get(u){const r=await fetch(u);if(!r.ok)throw new Error((await r.json()).error);return r.json()}
function svg(series){const W=260,H=120,P=22;const pts=Object.values(series).flat();if(!pts.length)return'';
 const xs=pts.map(p=>p[0]),x0=Math.min(...xs),x1=Math.max(...xs,x0+1);const X=x=>P+(x-x0)/(x1-x0)*(W-2*P),Y=y=>H-P-y*(H-2*P);
 const col={train:'#3b6fd8',eval:'#d8643b'};let s=`<svg width="${W}" height="${H}"><line x1="${P}" y1="${H-P}" x2="${W-P}" y2="${H-P}" stroke="#bbb"/><line x1="${P}" y1="${P}" x2="${P}" y2="${H-P}" stroke="#bbb"/><text x="2" y="${P+4}" font-size="9">1</text><text x="2" y="${H-P}" font-size="9">0</text>`;
 for(const [k,ps] of Object.entries(series)){s+=`<polyline fill="none" stroke="${col[k]||'#888'}" stroke-width="1.6" points="${ps.map(p=>X(p[0])+','+Y(p[1])).join(' ')}"/>`;
  for(const p of ps)s+=`<circle cx="${X(p[0])}" cy="${Y(p[1])}" r="2" fill="${col[k]||'#888'}"/>`}
 return s+`<text x="${W-P-60}" y="12" font-size="9" fill="#3b6fd8">train</text><text x="${W-P-25}" y="12" font-size="9" fill="#d8643b">eval</text></svg>`}
async function loadRun(){const r=await get('/api/run');$('#title').textContent=r.name;
 $('#sub').textContent=` - ${r.model||''} - ${r.steps} steps - ${r.domains.join(', ')}`;
 for(const d of r.domains)$('#f-domain').insertAdjacentHTML('beforeend',`<option>${esc(d)}</option>`);
 const c=await get('/api/curves');$('#curves').innerHTML=Object.entries(c).map(([d,s])=>`<div class="curve"><b>${esc(d)}</b><br>${svg(s)}</div>`).join('')||'no metrics yet'}
async function loadEpisodes(){const q=new URLSearchParams({domain:$('#f-domain').value,kind:$('#f-kind').value,status:$('#f-status').value});
 const eps=await get('/api/episodes?'+q);$('#count').textContent=eps.length+' episodes';
 $('#episodes').innerHTML=eps.map(e=>`<tr class="ep" data-id="${e.id}"><td>${e.step}</td><td>${e.kind}</td><td>${esc(e.domain)}</td><td>${esc(e.task)}</td><td>${e.reward.toFixed(2)}</td><td>${e.turns}</td><td>${e.status.map(s=>`<span class="tag ${s}">${s}</span>`).join('')}</td></tr>`).join('');
 for(const tr of document.querySelectorAll('tr.ep'))tr.onclick=()=>{location.hash='episode='+tr.dataset.id}}
async function openEpisode(id){const e=await get('/api/episode/'+id);let h=`<h2>Episode ${esc(e.id)}</h2><p>${esc(e.domain)} - ${esc(e.task)} - step ${e.step} (${e.kind}) - ${esc(e.state)}, ended: ${esc(e.end)} - ${e.status.map(s=>`<span class="tag ${s}">${s}</span>`).join('')}</p><p id="cost">${e.seconds.toFixed(1)} s${e.sandbox.runs?` - sandbox: ${e.sandbox.runs} runs, ${e.sandbox.cpu_s.toFixed(2)} CPU s`:''}</p>`;
 if(e.score){h+=`<h2>Score ${e.score.value.toFixed(3)}</h2><table id="components"><tr><th>component</th><th>value</th></tr>${Object.entries(e.score.components).map(([k,v])=>`<tr><td>${esc(k)}</td><td>${(+v).toFixed(3)}</td></tr>`).join('')}</table><p>${esc(e.score.explanation)}</p>`}
 if(e.flags.length)h+=`<p><b>Verifier flags:</b> ${e.flags.map(f=>`<span class="tag hack">${esc(f)}</span>`).join('')}</p>`;
 if(e.errors.length)h+=`<p><b>Errors:</b> ${e.errors.map(x=>esc(x.kind+': '+x.message)).join('; ')}</p>`;
 h+=`<h2>Turns</h2>`+e.messages.map(m=>`<div class="msg ${m.role}"><b>${m.role}</b>\n${esc(m.content)}${(m.tool_calls||[]).map(c=>`<span class="call">tool call: <b>${esc(c.name)}</b> ${esc(JSON.stringify(c.arguments??c.raw))}</span>`).join('')}</div>`).join('');
 if(e.diff)h+=`<h2>Workspace diff</h2><pre>${esc(e.diff)}</pre>`;
 if(e.render)h+=`<h2>Render</h2><img alt="render" style="max-width:100%" src="/api/file?path=${encodeURIComponent(e.render)}">`;
 h+=`<h2>Lifecycle</h2><table id="lifecycle"><tr><th>entity</th><th>state</th><th>reason</th><th>policy</th></tr>${e.events.map(v=>`<tr><td>${v.entity}</td><td>${esc(v.state)}</td><td>${esc(v.reason)}</td><td>${v.version}</td></tr>`).join('')}</table>`;
 $('#detail').innerHTML=h}
function route(){const m=location.hash.match(/episode=([\w-]+)/);if(m)openEpisode(m[1]).catch(err=>{$('#detail').innerHTML='<p>'+esc(err.message)+'</p>'})}
for(const s of ['#f-domain','#f-kind','#f-status'])$(s).onchange=loadEpisodes;
window.onhashchange=route;
loadRun().then(loadEpisodes).then(route);
</script></body></html>
"""
