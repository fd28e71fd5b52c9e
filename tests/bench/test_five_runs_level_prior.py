"""bench.five_runs: a simulated user's cluster never informs its own level prior (tau without
the campaign), and a cluster outside the transfer spread gets the shipped tau."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench import five_runs
from models_db.intervals import cluster_level_noise, load_interval_table
from planner.calibration.campaign_spread import estimate
from tests.bench.test_five_runs import rows


def test_tau_leaves_the_uploaded_campaign_out() -> None:
    table = load_interval_table()
    assert table is not None and table.transfer is not None
    first = table.transfer.campaigns[0]
    source, gpu_name = first.campaign.split("|")
    (row,) = rows(source, 1)
    assert row.cluster.gpu.name == gpu_name, "the fixture's GPU is the first campaign's"
    nested = five_runs.level_noise_without(row)
    kept = [c for c in table.transfer.campaigns if c.campaign != first.campaign]
    assert nested.shared_log_sd == pytest.approx(
        estimate(kept, table.transfer.within_log_sd).log_sd
    )
    assert nested.shared_log_sd != cluster_level_noise().shared_log_sd


def test_a_campaign_outside_the_spread_gets_the_shipped_tau() -> None:
    (row,) = rows("never-seen", 1)
    assert five_runs.level_noise_without(row) == cluster_level_noise()


def test_without_a_transfer_block_the_reml_sigma_b(monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.calibration.regularised import NOISE_SHARED_LOG_SD

    table = load_interval_table()
    assert table is not None
    monkeypatch.setattr(five_runs, "load_interval_table", lambda: replace(table, transfer=None))
    (row,) = rows("never-seen", 1)
    assert five_runs.level_noise_without(row).shared_log_sd == NOISE_SHARED_LOG_SD
