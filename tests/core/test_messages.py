"""The Messages-API shape: tool results from records, the one sealed result, history as the API wants it,
and the typed vocabulary that stays equal to its wire strings."""

import json

from desktop_app.core import Risk, StoredMessage, ToolCallRecord, TurnEnd
from desktop_app.core._messages import normalize, sealed_result, text_blocks, tool_result_block
from desktop_app.core._record import highest_risk


def test_a_sealed_result_is_an_error_that_warns_of_side_effects():
    block = sealed_result("toolu_1", "the run stopped before it finished", state_when_sealed="EXECUTING")
    assert block["type"] == "tool_result" and block["tool_use_id"] == "toolu_1" and block["is_error"] is True
    body = json.loads(block["content"][0]["text"])
    assert body["ok"] is False and body["_autoSealed"] is True and body["state_when_sealed"] == "EXECUTING"
    assert "the run stopped before it finished" in body["error"] and "side effects" in body["error"]


def test_a_record_without_a_result_still_answers_its_tool_use():
    record = ToolCallRecord(name="echo", input={}, id="toolu_2", error="boom", is_error=True)
    block = tool_result_block(record)
    assert block["tool_use_id"] == "toolu_2" and block["is_error"] is True
    assert json.loads(block["content"][0]["text"]) == {"ok": False, "error": "boom"}


def test_history_merges_roles_and_puts_tool_results_first():
    msgs = [
        StoredMessage("s", "user", text_blocks(["hi", ""])),
        StoredMessage("s", "assistant", [{"type": "tool_use", "id": "t", "name": "echo", "input": {}}]),
        StoredMessage("s", "user", text_blocks(["also"])),
        StoredMessage("s", "user", [{"type": "tool_result", "tool_use_id": "t", "content": []}]),
    ]
    out = normalize(msgs)
    assert [m["role"] for m in out] == ["user", "assistant", "user"]
    assert out[0]["content"] == [{"type": "text", "text": "hi"}]
    assert [b["type"] for b in out[2]["content"]] == ["tool_result", "text"]


def test_typed_vocabulary_equals_its_wire_strings():
    exit_codes = {"end_turn": 0, "error": 1, "paused": 3, "max_steps": 4, "interrupted": 130}
    assert {exit_codes[r] for r in TurnEnd} == {0, 1, 3, 4, 130}
    assert f"{TurnEnd.PAUSED}" == "paused" and Risk.HIGH == "high"
    assert highest_risk("low", "high", "medium") is Risk.HIGH
    assert highest_risk("nonsense", None) is Risk.LOW
