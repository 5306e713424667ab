"""GPU sampler: NVIDIA utilisation, memory and power through NVML, into the engine-metrics rows.

``GpuSampler(sink, engine=..., interval_s=5)`` reads every GPU each ``interval_s`` seconds on
one named daemon thread and hands ``sink`` a list of rows ``(engine, ts_seconds, metric,
labels, value)`` with metrics ``gpu:utilization`` (percent), ``gpu:memory_used_bytes`` and
``gpu:power_watts``, labelled ``{"gpu": "<index>"}``. Where there is no NVML (no driver, no
``nvidia-ml-py``, no GPU) it logs once "no NVIDIA GPU/NVML found: GPU sampling disabled" and
does nothing. Turning NVML readings into rows is the pure ``rows_from_readings`` so it can be
tested on a recorded sample without a GPU. A failing sink or a failed read is logged and
counted, never raised into the caller.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

Row = tuple[str, float, str, dict[str, str], float]
Sink = Callable[[list[Row]], None]
NO_GPU_MESSAGE = "no NVIDIA GPU/NVML found: GPU sampling disabled"


def rows_from_readings(readings: Sequence[Mapping[str, Any]], *, engine: str, ts: float) -> list[Row]:
    """Rows for the engine-metrics table from NVML readings.

    A reading is ``{"index": int, "utilization_gpu": percent, "memory_used": bytes,
    "power_mw": milliwatts}`` (NVML's units); a field that is missing or None (a GPU that
    does not report power, say) is left out rather than stored as zero.
    """
    rows: list[Row] = []
    for reading in readings:
        labels = {"gpu": str(reading["index"])}
        fields = (
            ("gpu:utilization", reading.get("utilization_gpu"), 1.0),
            ("gpu:memory_used_bytes", reading.get("memory_used"), 1.0),
            ("gpu:power_watts", reading.get("power_mw"), 1e-3),
        )
        rows.extend(
            (engine, ts, metric, dict(labels), float(value) * scale)
            for metric, value, scale in fields
            if value is not None
        )
    return rows


def load_nvml() -> Any | None:
    """The initialised ``pynvml`` module, or None when there is no usable NVIDIA GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() < 1:
            pynvml.nvmlShutdown()
            return None
    except Exception:  # ImportError, NVMLError_LibraryNotFound, driver errors: all mean "no GPU"
        return None
    return pynvml


def _optional(read: Callable[..., Any], *args: Any) -> Any:
    try:
        return read(*args)
    except Exception:  # NVMLError_NotSupported on GPUs without that sensor
        return None


def read_nvml(nvml: Any) -> list[dict[str, Any]]:
    """One reading per GPU, in NVML's units."""
    readings = []
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        utilization = _optional(lambda h: nvml.nvmlDeviceGetUtilizationRates(h).gpu, handle)
        memory = _optional(lambda h: nvml.nvmlDeviceGetMemoryInfo(h).used, handle)
        power = _optional(nvml.nvmlDeviceGetPowerUsage, handle)
        readings.append({"index": index, "utilization_gpu": utilization, "memory_used": memory, "power_mw": power})
    return readings


class GpuSampler:
    """Samples the GPUs on a daemon thread; ``start()`` and ``stop()`` (safe twice, bounded)."""

    def __init__(self, sink: Sink, *, engine: str, interval_s: float = 5.0, nvml: Any | None = None) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self._sink = sink
        self.engine = engine
        self.interval_s = interval_s
        self._nvml = nvml
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = 0
        self.errors = 0

    @property
    def enabled(self) -> bool:
        return self._nvml is not None

    def start(self) -> bool:
        """Start sampling; False (after one log line) where there is no GPU."""
        if self._nvml is None:
            self._nvml = load_nvml()
        if self._nvml is None:
            log.warning(NO_GPU_MESSAGE)
            return False
        self._thread = threading.Thread(target=self._run, name="agentwatch-gpu-sampler", daemon=True)
        self._thread.start()
        return True

    def sample_once(self) -> list[Row]:
        """Read every GPU now and hand the rows to the sink; errors are logged and counted."""
        try:
            rows = rows_from_readings(read_nvml(self._nvml), engine=self.engine, ts=time.time())
            self._sink(rows)
        except Exception:
            self.errors += 1
            log.exception("GPU sampler: reading or storing a sample failed")
            return []
        self.samples += 1
        return rows

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample_once()
            self._stop.wait(self.interval_s)

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        if self._nvml is not None:
            _optional(self._nvml.nvmlShutdown)
