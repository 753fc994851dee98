"""The cross-CPU comparison of run records (tests/helpers/float_records.py) against hand-made cases."""

from float_records import same_records, same_values


def test_float_rounding_passes_and_anything_else_fails():
    assert same_values({"s": -6.230189800262451, "n": 3}, {"s": -6.230190277099609, "n": 3})
    assert not same_values({"s": -6.23019}, {"s": -6.23029})  # the 5th digit
    assert not same_values({"n": 3}, {"n": 4}) and not same_values({"a": 1}, {"b": 1})
    assert not same_values({"ok": True}, {"ok": 1.0}) and not same_values("a", "b")
    assert not same_values([1.0, 2.0], [1.0]) and not same_values({"a": 1, "b": 2}, {"b": 2, "a": 1})


def test_jsonl_is_compared_line_by_line():
    a = '{"id": "q0", "score": 0.1234567}\n{"id": "q1", "score": 2.0}\n'
    assert same_records(a, a.replace("0.1234567", "0.12345671"))
    assert not same_records(a, a.replace("q1", "q2"))
    assert not same_records(a, a.splitlines()[0])
