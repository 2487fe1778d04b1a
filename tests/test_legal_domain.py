"""The legal domain: the shipped texts are really there, every kind's reference answer scores 1,
the wrong answers models give are rejected or get the documented partial credit, the held-out
split is disjoint, prompts fit the embedded model's window, and task files work through
`practicum verify legal`."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from practicum.cli import app
from practicum.config import DomainSection
from practicum.domains import build_domain, get_plugin
from practicum.domains.annotations import AnswerKey
from practicum.domains.legal import contracts, licences
from practicum.domains.legal.checks import clause_ref
from practicum.domains.legal.constitution import articles, references
from practicum.domains.legal.contracts import _business_days_after
from practicum.domains.legal.plugin import ALL_KINDS, LegalOptions, generate
from practicum.domains.plugin import BuildContext
from practicum.errors import TaskError
from practicum.records import Task

plugin = get_plugin("legal")
runner = CliRunner()


def _verify(task: Task, reply: str):  # type: ignore[no-untyped-def]
    return asyncio.run(plugin.verify(task, reply, BuildContext()))


def _domain(**section: Any):  # type: ignore[no-untyped-def]
    return build_domain(DomainSection.model_validate({"name": "legal", "env": "legal", **section}), seed=0)


@cache
def _tasks_of(kind: str, n: int = 6) -> list[Task]:
    d = _domain(options={"kinds": [kind], "eval_size": 0})
    return [d.source.train_task(i) for i in range(n)]


# --- the texts ---------------------------------------------------------------------------------------

def test_the_shipped_texts_are_there() -> None:
    cal = licences.choosealicense()
    assert len(cal) == 47 and cal["mit"].conditions == ("include-copyright",)
    assert "Permission is hereby granted" in cal["mit"].text and "[year]" in cal["mit"].text
    assert len(licences.spdx_licences()) > 650 and "BSD-3-Clause" in licences.spdx_licences()
    arts = articles()
    assert len(arts) > 450 and arts["21A"].title.startswith("Right to education")
    assert references(arts["9"]) == ["5", "6", "8"]


@pytest.mark.parametrize(("licence", "scenario", "permitted", "conditions"), [
    ("mit", "distribute_modified", "yes", ["include-copyright"]),
    ("gpl-3.0", "distribute_modified", "yes", ["include-copyright", "document-changes", "disclose-source", "same-license"]),
    ("bsl-1.0", "sell_binaries", "yes", []),  # its notice is required for source copies only
    ("bsl-1.0", "distribute_modified", "yes", ["include-copyright--source"]),
    ("agpl-3.0", "network_service", "yes", ["network-use-disclose"]),
    ("gpl-3.0", "network_service", "yes", []),
    ("apache-2.0", "patent_grant", "yes", []),
    ("bsd-3-clause-clear", "patent_grant", "no", []),
])
def test_licence_scenarios_follow_choosealicense_rules(licence: str, scenario: str, permitted: str,
                                                       conditions: list[str]) -> None:
    assert licences.scenario_answer(licences.choosealicense()[licence], scenario) == (permitted, conditions)
    assert licences.scenario_answer(licences.choosealicense()["mit"], "patent_grant") is None  # silent: not asked


# --- the task set --------------------------------------------------------------------------------------

def test_two_hundred_distinct_tasks_with_a_disjoint_held_out_split() -> None:
    d = _domain()
    held = d.source.eval_tasks()
    assert len(held) == 40
    train = [d.source.train_task(i) for i in range(220)]
    prompts = {t.prompt[-1].content for t in train}
    assert len(prompts) >= 200
    assert not prompts & {t.prompt[-1].content for t in held}
    assert {t.metadata["kind"] for t in train} == set(ALL_KINDS)
    assert {t.metadata["tier"] for t in train} == {1, 2, 3}
    again = _domain()
    assert [t.prompt for t in again.source.eval_tasks()[:5]] == [t.prompt for t in held[:5]]
    assert again.source.train_task(7).prompt == train[7].prompt


def test_the_section_sets_the_held_out_split() -> None:
    a = _domain(eval_size=5, eval_seed=9)
    b = _domain(eval_size=5, eval_seed=10)
    assert len(a.source.eval_tasks()) == 5
    assert [t.prompt for t in a.source.eval_tasks()] != [t.prompt for t in b.source.eval_tasks()]


def test_kinds_and_tiers_are_options() -> None:
    d = _domain(options={"kinds": ["deadline", "precedence"], "tiers": [3]}, eval_size=3)
    tasks = [d.source.train_task(i) for i in range(10)] + d.source.eval_tasks()
    assert {t.metadata["kind"] for t in tasks} <= {"deadline", "precedence"}
    assert {t.metadata["tier"] for t in tasks} == {3}


def test_default_prompts_fit_the_embedded_model_and_full_texts_is_an_option() -> None:
    rng = random.Random(0)
    opts = LegalOptions()
    longest = max(len(generate(k, rng, opts)[1]) for k in ALL_KINDS for _ in range(8))
    assert longest / 4 <= 3000
    full = LegalOptions(full_texts=True, kinds=["license_permission"])
    assert len(licences.permission_tasks(None)) > len(licences.permission_tasks(opts.max_document_tokens))
    assert max(len(generate("license_permission", random.Random(i), full)[1]) for i in range(60)) / 4 > 3000


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_every_kinds_reference_answer_scores_one(kind: str) -> None:
    for t in _tasks_of(kind):
        v = _verify(t, t.metadata["reference"])
        assert v.score.value == 1.0, (t.id, v.to_json(), t.metadata["reference"])


# --- wrong answers of the kinds models give ----------------------------------------------------------

def _key(t: Task) -> AnswerKey:
    return AnswerKey.model_validate(t.target)


def test_the_overridden_clause_is_rejected_and_named() -> None:
    for t in _tasks_of("precedence"):
        loser = next(d.value for d in _key(t).distractors if d.label == "overridden_clause")
        v = _verify(t, f"The later provision wins. <answer>{loser}</answer>")
        assert v.score.value == 0.0 and "distractor:overridden_clause" in v.flags


def test_a_definition_from_the_wrong_section_is_rejected() -> None:
    d = _domain(options={"kinds": ["definition"], "tiers": [2], "eval_size": 0})
    for t in (d.source.train_task(i) for i in range(4)):
        assert _verify(t, "<answer>clause 1.1</answer>").flags == ["distractor:wrong_section_definition"]
        assert _verify(t, f"<answer>Clause {_key(t).gold}</answer>").score.value == 1.0


def test_a_deadline_off_by_one_day_is_rejected() -> None:
    for t in _tasks_of("deadline"):
        gold = date.fromisoformat(_key(t).gold)
        early = date.fromordinal(gold.toordinal() - 1)
        v = _verify(t, f"<answer>{early.isoformat()}</answer>")
        assert v.score.value == 0.0 and "off_by_one_day" in v.flags
        assert _verify(t, f"<answer>{gold.strftime('%d %B %Y')}</answer>").score.value == 1.0


def test_business_days_and_the_clause_specific_definition_count_by_hand() -> None:
    # notice Friday 14 March 2025; 18 March a listed holiday. Mon 17 (1), Wed 19 (2), Thu 20 (3),
    # Fri 21 (4), Mon 24 (5). With Saturdays as Business Days: Sat 15 (1) ... Fri 21 (5).
    holiday = {date(2025, 3, 18)}
    assert _business_days_after(date(2025, 3, 14), 5, holiday) == date(2025, 3, 24)
    assert _business_days_after(date(2025, 3, 14), 5, holiday, saturday_ok=True) == date(2025, 3, 21)


def test_the_permission_without_its_condition_gets_partial_credit() -> None:
    d = _domain(options={"kinds": ["license_permission"], "tiers": [2, 3], "eval_size": 0})
    t = d.source.train_task(0)
    half = _verify(t, "<answer>\npermitted: yes\nconditions: none\n</answer>")
    assert half.score.value == pytest.approx(0.5) and "conditions" in half.score.explanation
    # contracts: the verdict alone is 1 of 4; with the clause, 2 of 4; the wrong verdict 0
    for t in _tasks_of("condition", 12):
        if t.metadata["reference"].startswith("<answer>Yes"):
            clause = clause_ref(t.metadata["reference"])
            assert _verify(t, "<answer>Yes.</answer>").score.value == pytest.approx(0.25)
            assert _verify(t, f"<answer>Yes, under clause {clause}.</answer>").score.value == pytest.approx(0.5)
            assert _verify(t, f"<answer>No, clause {clause} forbids it.</answer>").score.value == 0.0
            break
    else:
        pytest.fail("no permitted-with-condition question among 12")


def test_a_wrong_citation_is_rejected() -> None:
    for t in _tasks_of("citation_find"):
        key = _key(t)
        pin = next(d.value for d in key.distractors if d.label == "pin_cite_as_page")
        v = _verify(t, f"<answer>{pin}</answer>")
        assert v.score.value == 0.0 and "distractor:pin_cite_as_page" in v.flags
        vol, rest = key.gold.split(" ", 1)
        assert _verify(t, f"<answer>{int(vol) + 1} {rest}</answer>").score.value == 0.0
        spaced = key.gold.replace("F.3d", "F. 3d").replace("A.3d", "A. 3d")
        assert _verify(t, f"<answer>{spaced}</answer>").score.value == 1.0


def test_citation_list_partial_credit_and_courts_by_any_name() -> None:
    t = _tasks_of("citation_list")[0]
    gold = _key(t).gold
    v = _verify(t, "<answer>\n" + "\n".join(gold[:-1]) + "\n42 U.S.C. § 1983\n</answer>")
    assert v.score.value == pytest.approx((len(gold) - 1) / len(gold))
    court = _tasks_of("citation_court")[0]
    from practicum.domains.legal.citations import court_abbreviation

    cid = _key(court).gold
    assert _verify(court, f"<answer>{cid}</answer>").score.value == 1.0
    if court_abbreviation(cid) != "SCOTUS":
        assert _verify(court, f"<answer>{court_abbreviation(cid)}</answer>").score.value == 1.0
    other = next((d.value for d in _key(court).distractors), "scotus" if cid != "scotus" else "ca9")
    assert _verify(court, f"<answer>{other}</answer>").score.value == 0.0


def test_amount_cap_and_disputed_part_are_applied() -> None:
    # 10,000 overdue, 8% a year, 100 days: 10,000 * 0.08 * 100 / 365 = 219.18; capped at 2%: 200
    key = AnswerKey(answer_type="number", gold=200.0, tolerance=0.01, unit="dollars",
                    distractors=[{"value": 219.18, "label": "cap_ignored"}])
    t = Task(id="x", domain="legal", prompt=[], target=key.model_dump(), metadata={"question": "q"})
    assert _verify(t, "<answer>$200.00</answer>").score.value == 1.0
    assert _verify(t, "<answer>219.18</answer>").flags == ["distractor:cap_ignored"]
    for t in _tasks_of("amount", 10):
        for d in _key(t).distractors:
            v = _verify(t, f"<answer>{d.value}</answer>")
            assert v.score.value == 0.0 and f"distractor:{d.label}" in v.flags


def test_extract_scores_each_field() -> None:
    t = _tasks_of("extract")[0]
    gold = _key(t).gold
    reply = (f"<answer>\nparties: {gold['parties'][1]}; {gold['parties'][0]}\nterm_months: {gold['term_months']} months\n"
             f"governing_law: the laws of {gold['governing_law']}\neffective_date: {gold['effective_date']}\n</answer>")
    assert _verify(t, reply).score.value == 1.0
    wrong_law = reply.replace(f"the laws of {gold['governing_law']}", "Narnia")
    assert _verify(t, wrong_law).score.value == pytest.approx(0.75)


def test_contract_facts_are_in_the_text() -> None:
    c = contracts.make_contract(random.Random(5))
    text = c.text()
    for p in c.parties:
        assert p in text
    assert f"laws of {c.law}" in text and "1.4 Order of precedence" in text
    for h in c.facts["holidays"]:
        assert contracts.long_date(h) in text


def test_unusable_replies_score_zero_without_crashing() -> None:
    for kind in ALL_KINDS:
        t = _tasks_of(kind, 1)[0]
        for reply in ("", "<answer></answer>", "I cannot answer that.", "<answer>" + "x" * 5000 + "</answer>"):
            assert _verify(t, reply).score.value == 0.0, (kind, reply[:20])


# --- task files and the verify command ---------------------------------------------------------------

EXAMPLE = {
    "id": "lease-demo/precedence",
    "question": "Clause 3.2 and Schedule 2, paragraph 2 state different periods for paying Rent. Which provision governs?",
    "context": ("1.4 Order of precedence. If there is any conflict between the clauses of this Agreement and the "
                "Schedules, the clauses prevail.\n3.2 The Tenant shall pay each monthly payment of Rent within fourteen "
                "(14) days after the first day of each month.\n3.5 Notwithstanding clause 1.4, paragraph 2 of Schedule 2 "
                "prevails over clause 3.2.\nSCHEDULE 2, paragraph 2. Each monthly payment of Rent shall be paid within "
                "twenty-eight (28) days after the first day of each month."),
    "answer_type": "clause",
    "gold": "Schedule 2, paragraph 2",
    "distractors": [{"value": "3.2", "label": "overridden_clause"}],
    "reference": "Clause 3.5 displaces the general order of clause 1.4. <answer>Schedule 2, paragraph 2</answer>",
    "rubric": [{"id": "cites_override", "weight": 1, "description": "Relies on clause 3.5", "patterns": [r"\b3\.5\b"],
                "scope": "reply"}],
    "annotations": [
        {"annotator": "ann-1", "label": "Schedule 2, paragraph 2", "rationale": "3.5 overrides 1.4 for this conflict"},
        {"annotator": "ann-2", "label": "Schedule 2 para 2", "rationale": "specific override"},
    ],
}


def test_verify_command_on_an_annotated_task_file(tmp_path: Path) -> None:
    task = tmp_path / "task.json"
    task.write_text(json.dumps(EXAMPLE))
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("Clause 3.5 overrides clause 1.4 here. <answer>Schedule 2, paragraph 2</answer>")
    bad.write_text("<answer>Clause 3.2</answer>")
    out = runner.invoke(app, ["verify", "legal", "--task", str(task), "--answer", str(good), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == {"value": 1.0, "components": {"answer": 1.0, "rubric": 1.0},
                                      "explanation": "answer: right", "flags": []}
    out = runner.invoke(app, ["verify", "legal", "--task", str(task), "--answer", str(bad), "--json"])
    v = json.loads(out.output)
    assert v["value"] == 0.0 and v["flags"] == ["distractor:overridden_clause"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({**EXAMPLE, "rubric": [{"id": "r", "weight": -1, "patterns": ["x"]}]}))
    out = runner.invoke(app, ["verify", "legal", "--task", str(broken), "--answer", str(good)])
    assert out.exit_code == 2 and "broken.json" in out.output and "rubric.0.weight" in out.output


def test_load_task_wants_one_task(tmp_path: Path) -> None:
    p = tmp_path / "two.json"
    p.write_text(json.dumps([EXAMPLE, {**EXAMPLE, "id": "b"}]))
    with pytest.raises(TaskError, match="holds 2 tasks"):
        plugin.load_task(p)


def test_an_annotated_file_is_a_task_source(tmp_path: Path) -> None:
    rows = [{**EXAMPLE, "id": f"t{i}"} for i in range(10)]
    path = tmp_path / "bank.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    d = _domain(source={"kind": "annotated", "path": str(path), "eval_fraction": 0.2})
    assert [t.id for t in d.source.eval_tasks()] == ["t0", "t1"]
    assert {d.source.train_task(i).id for i in range(8)} == {f"t{i}" for i in range(2, 10)}
    t = d.source.train_task(0)
    assert _verify(t, t.metadata["reference"]).score.value == 1.0
    assert _verify(t, "<answer>Schedule 2, paragraph 2</answer>").score.value == pytest.approx(0.5)  # rubric unmet
    with pytest.raises(Exception, match="path"):
        _domain(source={"kind": "annotated"})


def test_envs_show_scores_the_references() -> None:
    out = runner.invoke(app, ["envs", "show", "legal", "--n", "3"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "max_document_tokens" in out.output and out.output.count("1.0") >= 3


def test_a_permission_answer_that_offers_both_verdicts_gets_no_verdict_credit():
    domain = build_domain(DomainSection(name="legal", env="legal", options={"kinds": ["condition"]}), 0)
    plugin = get_plugin("legal")
    seen = set()
    for i in range(12):
        task = domain.source.train_task(i)
        reference = task.metadata["reference"].removeprefix("<answer>").removesuffix("</answer>")
        verdict, rest = reference.split(maxsplit=1)  # "Yes," / "No." and the clause and condition
        seen.add(verdict.strip(",."))
        for hedged in (f"Yes or no, {rest}", f"No or yes, {rest}", f"Yes/No. {rest}"):
            v = asyncio.run(plugin.verify(task, f"<answer>{hedged}</answer>", BuildContext()))
            assert v.score.value == 0.0, (task.id, hedged, v.score.explanation)
        assert asyncio.run(plugin.verify(task, task.metadata["reference"], BuildContext())).score.value == 1.0
    assert seen == {"Yes", "No"}  # both kinds of verdict were tried
