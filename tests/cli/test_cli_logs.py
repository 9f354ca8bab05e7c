"""What the CLI prints on stderr: with --log-format json every line is one JSON object on every path (usage errors
found while parsing, the test-mode banner, Python and numpy warnings, results); the report names the data set
without the input's directories."""

from __future__ import annotations

import json

import numpy as np

import cli_harness
import dphist.publishing.execution

from conftest import ROOT, SAMPLE

CENSUS = str(SAMPLE / "census.csv")
SCHEMA = str(SAMPLE / "census.schema.yaml")


def invoke(*args: str) -> cli_harness.Outcome:
    return cli_harness.invoke(list(args))


def json_lines(text: str) -> list[dict]:
    lines = text.strip().splitlines()
    assert lines, "nothing was printed"
    return [json.loads(line) for line in lines]  # fails on any line that is not one JSON object


def test_usage_errors_found_while_parsing_are_json_lines(tmp_path):
    for args in (["release", CENSUS, "--log-format", "json", "--bogus"],
                 ["release", CENSUS, "--log-format=json", "--max-cells", "zero"],
                 ["release", CENSUS, "--log-format", "json"]):  # --epsilon missing
        result = invoke(*args)
        (record,) = json_lines(result.output)
        assert result.exit_code == 2 and record["event"] == "error" and record["exit_code"] == 2, result.output


def test_test_mode_banner_and_result_are_json_lines(tmp_path):
    result = invoke("release", CENSUS, "-s", SCHEMA, "-c", "sex", "-e", "1", "--seed", "3", "-o",
                    str(tmp_path / "t"), "--log-format", "json")
    assert result.exit_code == 0, result.output
    banner, done = json_lines(result.output)
    assert banner["event"] == "test_mode" and "NOT differentially private" in banner["message"]
    assert done["status"] == "ok" and done["test_mode"] is True


def test_warnings_are_one_line_each_in_the_log_format(tmp_path, monkeypatch):
    real = dphist.publishing.execution.run_plan

    def noisy_run(plan, progress=False):
        np.float64(1.0) / np.float64(0.0)  # numpy's RuntimeWarning: divide by zero
        return real(plan, progress)

    monkeypatch.setattr(dphist.publishing.execution, "run_plan", noisy_run)
    with np.errstate(divide="warn"):
        result = invoke("release", CENSUS, "-s", SCHEMA, "-c", "sex", "-e", "1", "--seed", "3", "-o",
                        str(tmp_path / "j"), "--log-format", "json")
        assert result.exit_code == 0, result.output
        events = [r["event"] for r in json_lines(result.output)]
        assert events == ["test_mode", "warning", "release"]
        text = invoke("release", CENSUS, "-s", SCHEMA, "-c", "sex", "-e", "1", "--seed", "3", "-o",
                      str(tmp_path / "t"), "-q")
    assert text.exit_code == 0
    warning_lines = [line for line in text.output.splitlines() if line.startswith("Warning: ")]
    assert len(warning_lines) == 1 and "divide by zero" in warning_lines[0]


def test_a_warning_from_another_thread_is_in_the_runs_log_format_too(tmp_path, monkeypatch):
    """A counting engine's worker thread has no click context: its warnings still follow --log-format."""
    import threading
    import warnings

    real = dphist.publishing.execution.run_plan

    def warning_worker(plan, progress=False):
        worker = threading.Thread(target=warnings.warn, args=("from a worker",))
        worker.start()
        worker.join()
        return real(plan, progress)

    monkeypatch.setattr(dphist.publishing.execution, "run_plan", warning_worker)
    result = invoke("release", CENSUS, "-s", SCHEMA, "-c", "sex", "-e", "1", "--seed", "3", "-o",
                    str(tmp_path / "j"), "--log-format", "json")
    assert result.exit_code == 0, result.output
    assert {"event": "warning", "message": "from a worker"} in json_lines(result.output)


def test_each_run_in_one_process_has_its_own_log_format(tmp_path):
    assert json_lines(invoke("release", CENSUS, "--log-format", "json").output)[0]["event"] == "error"
    assert invoke("release", CENSUS).output.startswith("Error: missing the privacy budget")


def test_the_report_names_the_data_set_without_its_directories(tmp_path):
    result = invoke("release", CENSUS, "-s", SCHEMA, "-c", "sex", "-e", "1", "-o", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    text = (tmp_path / "r" / "report.json").read_text()
    assert json.loads(text)["ledger"]["dataset"] == "census.csv"
    assert str(ROOT) not in text  # no absolute path of the input anywhere in the published report
    named = invoke("release", CENSUS, "-s", SCHEMA, "-c", "sex", "-e", "1", "-o", str(tmp_path / "n"),
                   "--dataset-id", "census-2026")
    assert named.exit_code == 0, named.output
    assert json.loads((tmp_path / "n" / "report.json").read_text())["ledger"]["dataset"] == "census-2026"


def test_plain_dphist_prints_its_help():
    result = invoke()
    assert result.exit_code == 0 and "Usage:" in result.output and "release" in result.output
