"""YAML and JSON numbers follow the one number rule: plain ASCII decimal, or refused by key."""

from __future__ import annotations

import datetime

import pytest
import yaml

from models_db.plain_yaml import NumberFormError, load_json, load_yaml


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1000", 1000),
        ("-8", -8),
        ("+5", 5),
        ("017", 17),  # decimal, not YAML 1.1's octal 15
        ("1e3", 1000.0),  # YAML 1.1 left this as text
        ("1E3", 1000.0),
        ("0.5", 0.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("2.5e-3", 0.0025),
    ],
)
def test_plain_decimal_reads_as_a_number(text: str, value: float) -> None:
    got = load_yaml(f"n: {text}")["n"]
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    "text", ["1_000", "1__0", "0x10", "0b101", "0o17", "1:30", "190:20:30.15", ".inf", "-.inf",
             ".nan", "100_000.5", "1e999", "!!int 0x10", "!!float .inf"],
)  # fmt: skip
def test_other_number_forms_are_refused_naming_the_key(text: str) -> None:
    with pytest.raises(NumberFormError, match=r"key 'num_gpus' \(line 2\): .* not a plain number"):
        load_yaml(f"name: x\nnum_gpus: {text}\n")


def test_the_path_and_line_of_a_nested_number_are_named() -> None:
    text = "jobs:\n  - num_gpus: 8\n  - tp: [1, 2_0]\n"
    with pytest.raises(NumberFormError) as caught:
        load_yaml(text)
    assert caught.value.key == "tp"
    assert "key 'tp' at jobs[1].tp[1] (line 3)" in str(caught.value)
    assert "'2_0'" in str(caught.value) and "quote it" in str(caught.value)


def test_quoted_text_and_everything_else_reads_as_safe_load_does() -> None:
    text = "a: '1_000'\nb: yes\nc: null\nd: 2024-01-01\ne: v1.2\nf: 12abc\ng: [1, x]\n"
    assert load_yaml(text) == yaml.safe_load(text)
    assert load_yaml(text)["d"] == datetime.date(2024, 1, 1)
    assert load_yaml(text)["a"] == "1_000"


def test_a_number_form_as_a_key_is_refused() -> None:
    with pytest.raises(NumberFormError, match="a key"):
        load_yaml("1_0: x\n")


def test_json_nan_and_infinity_are_refused_naming_the_key() -> None:
    assert load_json('[{"a": 1e3, "b": 2}]') == [{"a": 1000.0, "b": 2}]
    with pytest.raises(NumberFormError, match=r"key 'b' at \[1\]\.b: '-Infinity'"):
        load_json('[{"a": 1}, {"b": -Infinity}]')
    with pytest.raises(NumberFormError, match="key 'x'"):
        load_json('{"x": NaN}')


def test_text_that_is_not_yaml_still_raises_yaml_error() -> None:
    with pytest.raises(yaml.YAMLError):
        load_yaml("a: [1\n")
