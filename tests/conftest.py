from pathlib import Path
from typing import Optional

import pytest

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "datasets" / "tenset-mini"
SHARED = REPO.parent / "shared"


def tenset_mini_path() -> Optional[Path]:
    """The real mini TenSet dataset: bundled in datasets/, else the shared copy, else None."""
    for candidate in (BUNDLED, SHARED / "tenset-mini"):
        if (candidate / "network_info" / "all_tasks.pkl").is_file():
            return candidate
    return None


@pytest.fixture(scope="session")
def tenset_mini() -> Path:
    path = tenset_mini_path()
    if path is None:
        pytest.skip("tenset-mini is neither bundled in datasets/ nor present in ../shared/")
    return path


@pytest.fixture(scope="session")
def h200_ms() -> Path:
    """Real H200 measurements as a MetaSchedule database: the full one in ../shared when present,
    else the bundled 160-record excerpt (same workload indices), so CI always covers this source."""
    for path in (SHARED / "h200-ms", REPO / "datasets" / "h200-ms-mini"):
        if (path / "database_tuning_record.json").is_file():
            return path
    pytest.skip("neither ../shared/h200-ms nor the bundled datasets/h200-ms-mini is present")
