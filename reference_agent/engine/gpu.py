"""Whether this machine has an NVIDIA GPU for vLLM: NVML's device count.

The launcher asks about the machine it starts vLLM on, which need not be the collector's (whose
GPU sampler reads NVML on its own machine); ``nvidia-ml-py`` comes with the ``gpu`` extra.
"""

from __future__ import annotations

import contextlib


def nvml_device_count() -> int:
    """How many NVIDIA GPUs NVML sees: 0 without ``nvidia-ml-py``, a driver or a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # ImportError, NVMLError_LibraryNotFound, driver errors: all mean "no GPU"
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return 0
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
