"""pytest configuration: seed every test, and say once per run what hardware the tests see."""

import cudasteps  # noqa: F401  (registers torch.ops.cudasteps before any test module imports it)
import pytest
import torch
from _helpers import CUDA_SKIP_REASON


def pytest_report_header(config):
    cuda = (
        "CUDA tests skipped: " + CUDA_SKIP_REASON
        if CUDA_SKIP_REASON
        else (f"CUDA: {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}")
    )
    return [f"torch {torch.__version__} (CUDA {torch.version.cuda})", cuda]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
