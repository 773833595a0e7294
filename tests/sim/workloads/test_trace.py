import pytest

from jevserve.sim.errors import TraceError
from jevserve.sim.workloads.trace import read_trace


def test_jsonl_trace_is_read_and_sorted_by_arrival(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"request_id": "b", "arrival_s": 2, "prompt_tokens": 5, "output_tokens": 6}\n\n'
                    '{"request_id": "a", "arrival_s": 1, "prompt_tokens": 7, "output_tokens": 8, '
                    '"predicted_tokens": 9.5}\n')
    a, b = read_trace(path)
    assert (a.request_id, a.arrival_s, a.num_prompt_tokens, a.num_output_tokens, a.predicted_output_tokens) == (
        "a", 1.0, 7, 8, 9.5)
    assert b.request_id == "b"


def test_csv_trace_without_arrivals_when_they_are_generated(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("prompt_tokens,output_tokens\n10,20\n30,40\n")
    requests = read_trace(path, need_arrival=False)
    assert [r.request_id for r in requests] == ["0", "1"]


@pytest.mark.parametrize("content, message", [
    ('{"arrival_s": 1, "output_tokens": 3}', r"t.jsonl:1: missing field 'prompt_tokens'"),
    ('{"arrival_s": 1, "prompt_tokens": 0, "output_tokens": 3}', r"field 'prompt_tokens' = 0; expected an integer"),
    ('{"arrival_s": -2, "prompt_tokens": 1, "output_tokens": 3}', r"field 'arrival_s' = -2; expected seconds >= 0"),
    ('{"prompt_tokens": 1, "output_tokens": 3}', r"missing field 'arrival_s'"),
    ("[1, 2]", "expected a JSON object per line"),
    ("{bad", "not valid JSON"),
    # a number past a float's range read as infinity, which int() refused with a traceback
    ('{"arrival_s": 1, "prompt_tokens": 1e400, "output_tokens": 3}', r"field 'prompt_tokens' = inf; expected an"),
    ('{"arrival_s": 1, "prompt_tokens": 2, "output_tokens": 1e400}', r"field 'output_tokens' = inf; expected an"),
    ('{"arrival_s": 1, "prompt_tokens": true, "output_tokens": 3}', r"field 'prompt_tokens' = True; expected an"),
    ('{"arrival_s": true, "prompt_tokens": 2, "output_tokens": 3}', r"field 'arrival_s' = True; expected seconds"),
    ('{"arrival_s": 1, "prompt_tokens": 2, "output_tokens": 3, "predicted_tokens": -1}',
     r"field 'predicted_tokens' = -1; expected a number >= 0"),
    ('{"arrival_s": 1, "prompt_tokens": 2, "output_tokens": 3, "predicted_tokens": NaN}',
     r"field 'predicted_tokens' = nan; expected a number >= 0"),
    # an integer of 400 digits: float() raised OverflowError; the error quotes it cut short
    ('{"arrival_s": 1, "prompt_tokens": 1' + "0" * 400 + ', "output_tokens": 3}',
     r"field 'prompt_tokens' = 10000000000000000000…00000000 \(401 characters\); expected an integer"),
    ('{"arrival_s": 1' + "0" * 400 + ', "prompt_tokens": 2, "output_tokens": 3}', r"field 'arrival_s' = .*expected"),
    # past Python's 4,300-digit limit json.loads raises a ValueError that is no JSONDecodeError
    ('{"arrival_s": 1, "prompt_tokens": 1' + "0" * 5000 + ', "output_tokens": 3}', r"t.jsonl:1: not valid JSON"),
])
def test_bad_trace_rows_name_file_line_and_field(tmp_path, content, message):
    path = tmp_path / "t.jsonl"
    path.write_text(content + "\n")
    with pytest.raises(TraceError, match=message):
        read_trace(path)


def test_trace_suffix_must_be_known(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("x")
    with pytest.raises(TraceError, match=r"expected \.jsonl or \.csv"):
        read_trace(path)


def test_a_request_id_twice_is_refused_naming_both_rows(tmp_path):
    # an outside tester's trace with one id on two rows was accepted: a prediction keyed by it went to either
    path = tmp_path / "t.jsonl"
    path.write_text('{"request_id": "a", "arrival_s": 1, "prompt_tokens": 5, "output_tokens": 6}\n'
                    '{"request_id": "b", "arrival_s": 2, "prompt_tokens": 5, "output_tokens": 6}\n'
                    '{"request_id": "a", "arrival_s": 3, "prompt_tokens": 5, "output_tokens": 6}\n')
    with pytest.raises(TraceError, match=r"t.jsonl:3: request_id 'a' is also the id at .*t.jsonl:1"):
        read_trace(path)
    # a row without an id is given its row number, which an explicit id may also be
    path.write_text('{"request_id": "1", "arrival_s": 1, "prompt_tokens": 5, "output_tokens": 6}\n'
                    '{"arrival_s": 2, "prompt_tokens": 5, "output_tokens": 6}\n')
    with pytest.raises(TraceError, match=r"request_id '1' is also the id at"):
        read_trace(path)


@pytest.mark.parametrize("value", ["1_0", "\u0661\u0662", "0x10", " inf "])
def test_a_csv_count_in_a_spelling_float_reads_but_a_person_does_not_write_is_refused(tmp_path, value):
    path = tmp_path / "t.csv"
    path.write_text(f"arrival_s,prompt_tokens,output_tokens\n0,{value},3\n", encoding="utf-8")
    with pytest.raises(TraceError, match=r"t.csv:2: field 'prompt_tokens' = .*; expected an integer >= 1"):
        read_trace(path)
