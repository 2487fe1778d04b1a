"""The run audit: every task drawn is trained exactly once, or dropped with a reason, or failed.

:func:`audit` reads a run's store (the ``groups`` and append-only ``events`` tables the
orchestrator writes when each transition happens) and checks the invariant:

* the draw indices are contiguous from 0 (a draw missing from the record is a lost sample);
* every drawn group is settled: ``trained``, ``dropped`` (with a reason) or ``failed`` (with
  its error kinds and attempts) - a group still ``queued``/``generating``/``ready`` is in
  flight, which is only right while the run is unfinished (resume it to settle them);
* no group was trained twice: the number of times a group entered ``trained``, less the
  times a resume reverted a lost update, is 1 for a trained group and 0 for every other;
* every episode of a trained group is trained or failed (a failed one was kept out of the loss).
* a replayed group (``curriculum.replay``) was itself trained: a replay is recorded as a
  ``replay`` event, not as a second training, and is listed with the curriculum's decisions
  (drift reactions, level changes, a scaffold removed).

``practicum runs audit RUN`` prints the counts per state and reason and exits non-zero when the
invariant does not hold.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from practicum.records import GroupState
from practicum.store import Store

SETTLED = {GroupState.trained.value, GroupState.dropped.value, GroupState.failed.value}


@dataclass
class AuditReport:
    drawn: int = 0
    groups: Counter = field(default_factory=Counter)  # state -> count
    reasons: Counter = field(default_factory=Counter)  # (state, reason head) -> count, for dropped/failed
    episodes: Counter = field(default_factory=Counter)  # state -> count (episodes of settled groups)
    in_flight: list[str] = field(default_factory=list)
    missing_draws: list[int] = field(default_factory=list)
    trained_twice: list[str] = field(default_factory=list)
    unsettled_episodes: list[str] = field(default_factory=list)
    replayed: Counter = field(default_factory=Counter)  # group id -> times replayed (curriculum.replay)
    replayed_untrained: list[str] = field(default_factory=list)  # replayed, but never trained itself: a bug
    curriculum: list[str] = field(default_factory=list)  # curriculum decisions: "step N kind: line"
    retried_episodes: int = 0
    requeued_groups: int = 0
    reverted_groups: int = 0

    @property
    def ok(self) -> bool:
        return not (self.in_flight or self.missing_draws or self.trained_twice or self.unsettled_episodes
                    or self.replayed_untrained)

    def lines(self) -> list[str]:
        out = [f"drawn {self.drawn} groups: " + ", ".join(f"{k} {v}" for k, v in sorted(self.groups.items()))]
        for (state, reason), n in sorted(self.reasons.items()):
            out.append(f"  {state}: {reason} x{n}")
        out.append("episodes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.episodes.items())))
        out.append(f"retried episodes {self.retried_episodes}, re-queued groups {self.requeued_groups}, "
                   f"reverted updates {self.reverted_groups}")
        if self.replayed:
            out.append(f"replayed {sum(self.replayed.values())} time(s), {len(self.replayed)} group(s) "
                       "(each also trained once when fresh; a replay is not a second training)")
        for line in self.curriculum:
            out.append(f"  curriculum {line}")
        out.append(f"lost {len(self.missing_draws)}, in flight {len(self.in_flight)}, "
                   f"trained twice {len(self.trained_twice)}, unsettled episodes {len(self.unsettled_episodes)}")
        if self.in_flight:
            out.append(f"  in flight (resume the run to settle them): {', '.join(self.in_flight[:10])}"
                       f"{' ...' if len(self.in_flight) > 10 else ''}")
        if self.missing_draws:
            out.append(f"  draws missing from the record: {self.missing_draws[:20]}")
        if self.trained_twice:
            out.append(f"  trained more than once: {', '.join(self.trained_twice[:10])}")
        if self.unsettled_episodes:
            out.append(f"  episodes of trained groups neither trained nor failed: {', '.join(self.unsettled_episodes[:10])}")
        if self.replayed_untrained:
            out.append(f"  replayed but never trained: {', '.join(self.replayed_untrained[:10])}")
        out.append("audit: OK" if self.ok else "audit: FAILED")
        return out


def audit(store: Store) -> AuditReport:
    rep = AuditReport()
    rows = store.draws()
    rep.drawn = len(rows)
    draws = sorted(r[1] for r in rows)
    seen = set(draws)
    rep.missing_draws = [k for k in range(draws[-1] + 1) if k not in seen] if draws else []
    trained_in: Counter = Counter()
    for _t, entity, eid, _gid, state, reason, step, _ver in store.events():
        if entity == "replay":
            rep.replayed[eid] += 1
        elif entity == "curriculum":
            rep.curriculum.append(f"step {step} {state}: {reason}")
        if entity == "group":
            if state == GroupState.trained.value:
                trained_in[eid] += 1
            elif reason.startswith("reverted"):
                trained_in[eid] -= 1
                rep.reverted_groups += 1
            elif reason.startswith("requeued"):
                rep.requeued_groups += 1
    for gid, _draw, state, _step, reason, _attempts in rows:
        rep.groups[state] += 1
        if state in (GroupState.dropped.value, GroupState.failed.value):
            rep.reasons[(state, (reason or "(no reason given)").split(":")[0])] += 1
        if state not in SETTLED:
            rep.in_flight.append(gid)
        if gid in rep.replayed and state != GroupState.trained.value:
            rep.replayed_untrained.append(gid)
        want = 1 if state == GroupState.trained.value else 0
        if trained_in[gid] > want:
            rep.trained_twice.append(gid)
    rep.retried_episodes = int(store.db.execute(  # each retry is an episode row of attempt > 1
        "SELECT COUNT(*) FROM episodes e JOIN groups g ON e.group_id = g.id WHERE g.kind = 'train' AND e.attempt > 1"
    ).fetchone()[0])
    for _gid, state, eid, ep_state in store.db.execute(
            "SELECT g.id, g.state, e.id, e.state FROM groups g JOIN episodes e ON e.group_id = g.id "
            "WHERE g.kind = 'train' AND g.draw >= 0"):
        if state in SETTLED:
            rep.episodes[ep_state] += 1
        if state == GroupState.trained.value and ep_state not in ("trained", "failed"):
            rep.unsettled_episodes.append(eid)
    return rep


def audit_run(run_dir: str | Path) -> AuditReport:
    path = Path(run_dir) / "store.sqlite"
    if not path.is_file():
        from practicum.errors import StoreError

        raise StoreError(f"{run_dir}: no run here (no store.sqlite)")
    store = Store(path)
    try:
        return audit(store)
    finally:
        store.close()
