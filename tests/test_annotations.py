"""The expert-annotation module: the file format and its errors, the rule scorer, agreement
statistics against published examples, and the judge hook against a local HTTP server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from practicum.domains.annotations import (
    AnswerKey,
    Judge,
    JudgeOptions,
    agreement,
    cohen_kappa,
    fleiss_kappa,
    grade,
    krippendorff_alpha,
    load_annotated,
    score_rules,
)
from practicum.errors import ConfigError, TaskError

# --- agreement statistics: published examples ------------------------------------------------------


def test_cohen_kappa_matches_the_textbook_example() -> None:
    # 50 items: both yes 20, A yes/B no 5, A no/B yes 10, both no 15 -> p_o 0.7, p_e 0.5, kappa 0.4
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(a, a) == 1.0


def test_fleiss_kappa_matches_fleiss_1971_worked_example() -> None:
    # the 10 subjects x 5 categories, 14 raters table of Fleiss' kappa's standard worked example
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
             [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    assert fleiss_kappa(table) == pytest.approx(0.210, abs=5e-4)
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([[1, 1], [3, 0]])


def test_krippendorff_alpha_matches_krippendorff_2011_example_with_missing_values() -> None:
    # "Computing Krippendorff's Alpha-Reliability" (2011), 4 observers x 12 units, with gaps:
    # nominal alpha 0.743, interval alpha 0.849
    n = None
    rows = [[1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n], [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
            [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n], [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n]]
    units = [[v for v in col if v is not None] for col in zip(*rows)]
    assert krippendorff_alpha(units) == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(units, "interval") == pytest.approx(0.849, abs=5e-4)
    assert krippendorff_alpha([[True, True], [False, False], [True, True, True]]) == 1.0
    # systematic disagreement is below chance
    assert krippendorff_alpha([[True, False], [False, True], [True, False]]) < 0


# --- the file format -------------------------------------------------------------------------------

TASK: dict[str, Any] = {
    "id": "nda-1/precedence",
    "question": "Which clause governs the payment period?",
    "context": "4.2 Pay within 30 days. Schedule 2, paragraph 2: pay within 45 days. 1.4 The Schedules prevail.",
    "answer_type": "label",
    "gold": "Schedule 2, paragraph 2",
    "aliases": ["Schedule 2 paragraph 2", "Sched. 2, para. 2"],
    "distractors": [{"value": "4.2", "label": "overridden_clause"}],
    "rubric": [
        {"id": "names_rule", "weight": 2, "description": "Cites the order of precedence (1.4)", "patterns": [r"\b1\.4\b"]},
        {"id": "explains", "weight": 1, "description": "Explains why the schedule prevails", "check": "judge"},
    ],
    "response": "Clause 4.2 governs.",
    "annotations": [
        {"annotator": "ann-1", "label": "Schedule 2, paragraph 2", "rubric": {"names_rule": False, "explains": False},
         "rationale": "1.4 puts the Schedules first"},
        {"annotator": "ann-2", "label": "Schedule 2 paragraph 2", "rubric": {"names_rule": False, "explains": False}},
    ],
}


def _write(tmp_path: Path, data: Any, name: str = "tasks.json") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def test_the_format_reads_one_task_a_list_or_jsonl(tmp_path: Path) -> None:
    (t,) = load_annotated(_write(tmp_path, TASK))
    assert t.gold == "Schedule 2, paragraph 2" and [a.annotator for a in t.annotations] == ["ann-1", "ann-2"]
    assert t.rubric[0].check == "rule" and t.rubric[1].check == "judge"
    two = [TASK, {**TASK, "id": "other"}]
    assert [x.id for x in load_annotated(_write(tmp_path, two, "list.json"))] == ["nda-1/precedence", "other"]
    jsonl = _write(tmp_path, "\n".join(json.dumps(x) for x in two) + "\n", "tasks.jsonl")
    assert len(load_annotated(jsonl)) == 2


def test_without_gold_the_annotators_majority_is_the_gold(tmp_path: Path) -> None:
    anns = [{"annotator": f"a{i}", "label": lab} for i, lab in enumerate(["4.2", "Schedule 2", "4.2."])]
    (t,) = load_annotated(_write(tmp_path, {"id": "m", "question": "q?", "annotations": anns}))
    assert t.gold == "4.2"
    tie = [{"annotator": "a", "label": "x"}, {"annotator": "b", "label": "y"}]
    with pytest.raises(TaskError, match="tie"):
        load_annotated(_write(tmp_path, {"id": "t", "question": "q?", "annotations": tie}))


@pytest.mark.parametrize(("change", "names"), [
    ({"question": None}, "question"),
    ({"rubric": [{"id": "r", "weight": 0, "patterns": ["x"]}]}, "rubric.0.weight"),
    ({"rubric": [{"id": "r", "patterns": ["(unclosed"]}]}, "rubric.0.patterns"),
    ({"answer_type": "colour"}, "answer_type"),
    ({"annotations": [{"annotator": "a", "rubric": {"nope": True}}]}, "annotations.0.rubric"),
    ({"annotations": [{"label": "x"}]}, "annotations.0.annotator"),
    ({"gold": None, "rubric": [], "annotations": []}, "gold answer, rubric items"),
    ({"answer_type": "number", "gold": "forty"}, "not a number"),
    ({"surprise": 1}, "surprise"),
])
def test_bad_task_files_name_the_file_and_the_field(tmp_path: Path, change: dict[str, Any], names: str) -> None:
    data = {**TASK, **change}
    data = {k: v for k, v in data.items() if v is not None or k != "question"}
    path = _write(tmp_path, data, "bad.json")
    with pytest.raises(TaskError) as e:
        load_annotated(path)
    assert str(path) in str(e.value) and names in str(e.value)


def test_bad_json_and_duplicate_ids_name_the_file_and_line(tmp_path: Path) -> None:
    p = _write(tmp_path, json.dumps(TASK) + "\n{not json\n", "x.jsonl")
    with pytest.raises(TaskError, match=r"x\.jsonl:2: not valid JSON"):
        load_annotated(p)
    p = _write(tmp_path, [TASK, TASK], "dup.json")
    with pytest.raises(TaskError, match=r"dup\.json\[1\]: id"):
        load_annotated(p)
    with pytest.raises(TaskError, match="cannot read"):
        load_annotated(tmp_path / "missing.json")


# --- scoring -----------------------------------------------------------------------------------------

def test_the_gold_label_its_aliases_and_the_distractor_flag() -> None:
    key = AnswerKey.model_validate({k: TASK[k] for k in ("answer_type", "gold", "aliases", "distractors")})
    assert score_rules(key, "reasoning... <answer>Sched. 2, para. 2</answer>").score.value == 1.0
    wrong = score_rules(key, "<answer>4.2</answer>")
    assert wrong.score.value == 0.0 and "distractor:overridden_clause" in wrong.flags
    untagged = score_rules(key, "Schedule 2, paragraph 2")
    assert untagged.score.value == 1.0 and "no_answer_tags" in untagged.flags


def test_numbers_dates_sets_and_fields() -> None:
    num = AnswerKey(answer_type="number", gold=219.18, tolerance=0.01, unit="dollars")
    assert score_rules(num, "<answer>$219.18</answer>").score.value == 1.0
    assert score_rules(num, "<answer>219.18 dollars</answer>").score.value == 1.0
    assert score_rules(num, "<answer>219.18 pounds</answer>").flags == ["wrong_unit"]
    assert score_rules(num, "<answer>220.18</answer>").score.value == 0.0
    day = AnswerKey(answer_type="date", gold="2025-03-24")
    for ok in ("2025-03-24", "24 March 2025", "March 24, 2025", "Monday 24th March 2025"):
        assert score_rules(day, f"<answer>{ok}</answer>").score.value == 1.0, ok
    late = score_rules(day, "<answer>2025-03-25</answer>")
    assert late.score.value == 0.0 and "off_by_one_day" in late.flags
    s = AnswerKey(answer_type="set", gold=["a", "b", "c"])
    assert score_rules(s, "<answer>a\nb\nd</answer>").score.value == pytest.approx(2 / 4)
    f = AnswerKey(answer_type="fields", gold={"parties": ["Acme Ltd", "Beta LLC"], "term_months": 24,
                                              "governing_law": "England and Wales"}, unit="months")
    full = "<answer>\nparties: Beta LLC; Acme Ltd\nterm months: 24 months\ngoverning law: England and Wales\n</answer>"
    assert score_rules(f, full).score.value == 1.0
    half = score_rules(f, "<answer>\nparties: Acme Ltd; Beta LLC\nterm_months: 12\n</answer>")
    assert half.score.value == pytest.approx(1 / 3) and "governing_law: missing" in half.score.explanation


def test_rubric_weights_forbidden_patterns_and_unjudged_items() -> None:
    key = AnswerKey(gold=None, rubric=[
        {"id": "verdict", "weight": 1, "patterns": [r"^\W*yes\b"]},
        {"id": "condition", "weight": 2, "patterns": [r"^\W*yes\b", "consent"], "match": "all"},
        {"id": "clause", "weight": 1, "patterns": [r"\b6\.1\b"], "forbid": [r"\b6\.2\b"]},
        {"id": "tone", "weight": 5, "description": "Is courteous"},
    ])
    full = score_rules(key, "<answer>Yes, under clause 6.1, with the Landlord's consent.</answer>")
    assert full.score.value == 1.0 and full.score.components == {"rubric": 1.0} and "unjudged" in full.flags
    assert score_rules(key, "<answer>Yes, under clause 6.1.</answer>").score.value == pytest.approx(2 / 4)
    assert score_rules(key, "<answer>Yes, clause 6.1 or 6.2, with consent</answer>").score.value == pytest.approx(3 / 4)
    assert score_rules(key, "<answer>No. Clause 6.1, consent.</answer>").score.value == pytest.approx(1 / 4)


# --- the judge, against a local HTTP server ----------------------------------------------------------

class _Server:
    """An OpenAI-compatible chat-completions stand-in (a test seam): replies per ``mode``."""

    def __init__(self) -> None:
        self.mode = "pass"
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                if outer.mode == "slow":
                    time.sleep(1.5)
                if outer.mode == "500":
                    self.send_response(500)
                    self.end_headers()
                    return
                content = {"pass": '{"verdict": "pass", "reason": "explains it"}',
                           "fail": 'Here you go: {"verdict": "fail", "reason": "no"}',
                           "prose": "I think it passes.", "slow": '{"verdict": "pass"}'}.get(outer.mode, "")
                raw = b"<html>oops" if outer.mode == "html" else json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():  # type: ignore[no-untyped-def]
    s = _Server()
    yield s
    s.close()


JUDGED = AnswerKey(gold="Schedule 2, paragraph 2", rubric=[
    {"id": "names_rule", "weight": 1, "patterns": [r"\b1\.4\b"], "scope": "reply"},
    {"id": "explains", "weight": 2, "description": "Explains why the schedule prevails"},
])
REPLY = "Under clause 1.4 the Schedules prevail, so <answer>Schedule 2, paragraph 2</answer>"


def test_judge_is_a_separate_component_and_its_verdicts_are_cached(server: _Server, tmp_path: Path) -> None:
    judge = Judge(JudgeOptions(enabled=True, base_url=server.url, model="m1", timeout_s=5), tmp_path / "cache")
    v = asyncio.run(grade(JUDGED, REPLY, "Which clause governs?", judge))
    assert v.score.components == {"answer": 1.0, "rubric": 1.0, "judge": 1.0} and v.score.value == 1.0
    assert len(server.requests) == 1 and server.requests[0]["path"] == "/v1/chat/completions"
    assert server.requests[0]["model"] == "m1" and server.requests[0]["temperature"] == 0
    server.mode = "fail"  # a cached verdict is not asked again
    again = asyncio.run(grade(JUDGED, REPLY, "Which clause governs?", judge))
    assert again.score.components["judge"] == 1.0 and len(server.requests) == 1 and "cached" in again.score.explanation
    other = Judge(JudgeOptions(enabled=True, base_url=server.url, model="m2"), tmp_path / "cache")
    failed = asyncio.run(grade(JUDGED, REPLY, "Which clause governs?", other))  # another model: its own key
    assert len(server.requests) == 2 and failed.score.components["judge"] == 0.0
    assert failed.score.value == pytest.approx((1 + 1) / (1 + 1 + 2))
    without = asyncio.run(grade(JUDGED, REPLY, "Which clause governs?", None))
    assert "judge" not in without.score.components and "unjudged" in without.flags


@pytest.mark.parametrize(("mode", "error"), [("slow", "timeout"), ("html", "bad_json"), ("prose", "bad_json"),
                                             ("500", "http_500")])
def test_judge_failures_are_recorded_not_raised(server: _Server, tmp_path: Path, mode: str, error: str) -> None:
    server.mode = mode
    judge = Judge(JudgeOptions(enabled=True, base_url=server.url, model="m", timeout_s=0.5), tmp_path)
    v = asyncio.run(grade(JUDGED, REPLY, "q", judge))
    assert f"judge_error:{error}" in v.flags and "judge" not in v.score.components
    assert v.score.value == 1.0  # the failed item is left out, the rest still counts
    assert not list(tmp_path.glob("*.json"))  # failures are not cached


def test_judge_sends_the_key_from_the_named_variable(server: _Server, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEGAL_JUDGE_KEY", "sk-test")
    judge = Judge(JudgeOptions(enabled=True, base_url=server.url, api_key_env="LEGAL_JUDGE_KEY"), tmp_path)
    asyncio.run(grade(JUDGED, REPLY, "q", judge))
    assert server.requests[0]["auth"] == "Bearer sk-test"
    monkeypatch.delenv("LEGAL_JUDGE_KEY")
    with pytest.raises(ConfigError, match="LEGAL_JUDGE_KEY"):
        Judge(JudgeOptions(enabled=True, api_key_env="LEGAL_JUDGE_KEY"), tmp_path)


def test_unreachable_judge_is_a_connection_error(tmp_path: Path) -> None:
    judge = Judge(JudgeOptions(enabled=True, base_url="http://127.0.0.1:9/v1", timeout_s=2), tmp_path)
    v = asyncio.run(grade(JUDGED, REPLY, "q", judge))
    assert "judge_error:connection" in v.flags


# --- agreement over a file, and its command ----------------------------------------------------------

def _panel() -> list[dict[str, Any]]:
    # three annotators label four tasks; rubric judgments of each task's sample response
    labels = [("4.2", "4.2", "4.2"), ("yes", "yes", "no"), ("1.1", "7.3", "7.3"), ("a", "a", "a")]
    votes = [(True, True, True), (False, False, True), (True, True, True), (False, False, False)]
    out = []
    for i, (labs, vs) in enumerate(zip(labels, votes)):
        out.append({"id": f"t{i}", "question": "q?", "gold": labs[0], "response": "clause 4.2" if i % 2 == 0 else "x",
                    "rubric": [{"id": "cites", "patterns": [r"4\.2"]}],
                    "annotations": [{"annotator": n, "label": lab, "rubric": {"cites": v}}
                                    for n, lab, v in zip(("a1", "a2", "a3"), labs, vs)]})
    return out


def test_agreement_report_on_a_panel(tmp_path: Path) -> None:
    tasks = load_annotated(_write(tmp_path, _panel()))
    r = agreement(tasks)
    assert r.annotators == ["a1", "a2", "a3"] and r.label_units == 4
    # pairs that agree: 3 + 1 + 1 + 3 of 12
    assert r.label_percent == pytest.approx(8 / 12)
    units = [["4.2"] * 3, ["yes", "yes", "no"], ["1.1", "7.3", "7.3"], ["a"] * 3]
    cats = sorted({v for u in units for v in u})
    assert r.label_fleiss_kappa == pytest.approx(fleiss_kappa([[u.count(c) for c in cats] for u in units]))
    assert r.label_alpha == pytest.approx(krippendorff_alpha(units))
    assert r.label_cohen_kappa is None  # three annotators
    assert r.rubric_alpha == pytest.approx(krippendorff_alpha([[True] * 3, [False, False, True], [True] * 3, [False] * 3]))
    # the rule "mentions 4.2" on the responses: t0 yes/majority yes, t1 no/no, t2 yes/yes, t3 no/no
    assert r.rule_vs_experts == 1.0


def test_agreement_command(tmp_path: Path) -> None:
    path = _write(tmp_path, _panel())
    cmd = [sys.executable, "-m", "practicum.domains.annotations", "agreement", str(path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Fleiss' kappa" in out.stdout and "Krippendorff's alpha" in out.stdout
    js = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=60)
    assert json.loads(js.stdout)["label_units"] == 4
    bad = _write(tmp_path, {"id": "x"}, "bad.json")
    err = subprocess.run([sys.executable, "-m", "practicum.domains.annotations", "agreement", str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert err.returncode == 2 and "bad.json" in err.stderr and "question" in err.stderr


def test_the_cli_reports_agreement_and_names_a_bad_file(tmp_path):
    from typer.testing import CliRunner

    from practicum.cli import app

    task = {"id": "t1", "domain": "legal", "question": "Which provision governs?", "answer_type": "label",
            "gold": "B", "annotations": [{"annotator": "a", "label": "B"}, {"annotator": "b", "label": "B"},
                                         {"annotator": "c", "label": "A"}]}
    good = tmp_path / "task.json"
    good.write_text(json.dumps([task, {**task, "id": "t2", "annotations": [
        {"annotator": "a", "label": "A"}, {"annotator": "b", "label": "A"}, {"annotator": "c", "label": "A"}]}]))
    r = CliRunner().invoke(app, ["annotations", "agreement", str(good), "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert report["tasks"] == 2 and report["annotators"] == ["a", "b", "c"]
    assert abs(report["label_percent"] - (1 / 3 + 1) / 2) < 1e-9  # pairs agreeing: 1 of 3, then 3 of 3
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**task, "annotations": [{"annotator": "a"}], "gold": None}))
    r = CliRunner().invoke(app, ["annotations", "agreement", str(bad)])
    assert r.exit_code == 2 and "bad.json" in r.output
