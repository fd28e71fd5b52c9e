"""A plan response's band is the one for a campaign the fit never saw (issue 12 item 9)."""

from __future__ import annotations

import math

from app.planning.compute import evaluate_request
from app.planning.reports import LayoutReport
from models_db.intervals import load_interval_table
from tests.app.calibration.test_suggestions import EIGHT_B as REQUEST


def test_the_shipped_table_carries_the_spread_of_never_fitted_campaigns() -> None:
    table = load_interval_table()
    assert table is not None and table.transfer is not None
    kinds = {c.kind for c in table.transfer.campaigns}
    assert kinds == {"shared", "published"}
    assert table.transfer.df == len(table.transfer.campaigns) - 1
    # wider than the shared rows' four campaigns say (their REML sigma_b, 0.022)
    assert table.transfer.log_sd > 0.022


def test_the_response_says_its_band_is_widened_and_by_what() -> None:
    table = load_interval_table()
    assert table is not None and table.transfer is not None
    raw = evaluate_request(REQUEST).raw
    perf = raw["performance"]
    info = perf["interval"]
    assert "widened for a campaign the fit never saw" in info["band"]
    assert info["between_campaign_log_sd"] == round(table.transfer.log_sd, 4)
    assert info["df"] == table.transfer.df
    low, high = perf["tokens_per_s_per_gpu_interval"]
    band = table.bands[info["regime"]]
    # at least as wide in log as the table's band with the shared rows' sigma_b
    assert math.log(high / low) > math.log(band.high / band.low)
    report = LayoutReport.model_validate(raw)  # the schema is unchanged: the fields validate
    assert report.performance is not None and report.performance.interval == info
