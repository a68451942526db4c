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
    path = SHARED / "h200-ms"
    if not (path / "database_tuning_record.json").is_file():
        pytest.skip("../shared/h200-ms (the H200 MetaSchedule database) is not present on this machine")
    return path
