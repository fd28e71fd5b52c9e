"""The one jobs-file reader of ``planner batch`` and the web's batch page."""

from __future__ import annotations

import re

import pytest

from app.batches.jobs_file import JobsFileError, batch_job, file_format, guess_format, parse_jobs
from app.planning.convert import RequestError

CSV = (
    "name,model,gpu,num_gpus,seq_length,global_batch_size,tp\n"
    '\na,llama3.1-8b,h100,16,4096,128,"1,2"\n'
)


def test_csv_rows_keep_their_line_and_read_digits_as_numbers() -> None:
    found = parse_jobs(CSV, "csv", source="j.csv")
    assert found.jobs == [
        {"name": "a", "model": "llama3.1-8b", "gpu": "h100", "num_gpus": 16,
         "seq_length": 4096, "global_batch_size": 128, "tp": "1,2"}
    ]  # fmt: skip
    assert found.lines == [3]  # the blank line is skipped but counted


def test_a_spreadsheets_byte_order_mark_is_not_part_of_the_first_column() -> None:
    assert parse_jobs("\ufeff" + CSV, "csv", source="j.csv").jobs[0]["name"] == "a"


def test_an_output_file_reads_back_as_its_jobs() -> None:
    text = "name,rank,model,tokens_per_s_per_gpu,error\nx,1,llama3.1-8b,123.4,\n"
    assert parse_jobs(text, "csv", source="out.csv").jobs == [{"name": "x", "model": "llama3.1-8b"}]


@pytest.mark.parametrize(
    ("text", "fmt", "says"),
    [
        ("a,b\n1,2\n", "csv", "the first line (a, b) names no job column"),
        ("name,model\nx,y,z\n", "csv", "j line 2 has 3 cells but the header names 2 columns"),
        ("name,model\n", "csv", "j has a header but no jobs"),
        ("jobs: []\n", "yaml", "j has no jobs"),
        ("{}", "json", "j: expected a list of job objects"),
        ("x", "xlsx", "j: use a .csv, .yaml, .yml or .json file"),
        ("  \n", "csv", "j is empty"),
    ],
)
def test_a_file_that_is_not_jobs_says_why(text: str, fmt: str, says: str) -> None:
    with pytest.raises(JobsFileError, match=re.escape(says)):
        parse_jobs(text, fmt, source="j")


def test_formats_come_from_the_name_or_the_pasted_text() -> None:
    assert [file_format(n) for n in ("a.CSV", "b.yml", "c.json", "d.xlsx", "e")] == [
        "csv", "yaml", "json", None, None
    ]  # fmt: skip
    assert guess_format("# jobs\n- name: a\n") == "yaml"
    assert guess_format("jobs:\n  - name: a\n") == "yaml"
    assert guess_format("name,model\n") == "csv"


def test_a_row_becomes_the_apis_batch_job_or_names_its_column() -> None:
    job = parse_jobs(CSV, "csv", source="j.csv").jobs[0]
    assert batch_job(job)["tp"] == [1, 2]
    with pytest.raises(RequestError, match="seq_length"):
        batch_job({**job, "seq_length": 0})
