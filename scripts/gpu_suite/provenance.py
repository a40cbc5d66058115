"""Provenance of every file the suite writes, and the device state logged around each timed block.

``device_state`` reads the SM and memory clocks, the power draw, the temperature and the active
clock-event (throttle) reasons through NVML (``pynvml``, from the ``nvidia-ml-py`` package) when it is
importable, else through ``nvidia-smi --query-gpu``; without an NVIDIA device it says so.
"""

from __future__ import annotations

import datetime as dt
import platform
import shutil
import subprocess
import sys
import time

SMI_FIELDS = ("clocks.sm", "clocks.mem", "power.draw", "temperature.gpu", "clocks_event_reasons.active")


def _nvml_state() -> dict:
    import pynvml

    pynvml.nvmlInit()
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        reasons = None
        for getter in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            if hasattr(pynvml, getter):
                reasons = hex(getattr(pynvml, getter)(h))
                break
        return {"sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
                "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
                "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
                "clock_event_reasons": reasons, "source": "pynvml"}
    finally:
        pynvml.nvmlShutdown()


def _smi_state() -> dict:
    out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=20, check=True).stdout.strip().splitlines()[0]
    sm, mem, power, temp, reasons = [v.strip() for v in out.split(",")]
    return {"sm_clock_mhz": float(sm), "mem_clock_mhz": float(mem), "power_w": float(power),
            "temperature_c": float(temp), "clock_event_reasons": reasons, "source": "nvidia-smi"}


def device_state() -> dict:
    """Clocks, power, temperature now (``unavailable`` with the reason when they cannot be read)."""
    stamp = {"time_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    errors = []
    try:
        return {**_nvml_state(), **stamp}
    except Exception as exc:  # no pynvml, or no NVIDIA driver: try nvidia-smi, and say what failed
        errors.append(f"pynvml: {type(exc).__name__}: {str(exc)[:120]}")
    if shutil.which("nvidia-smi"):
        try:
            return {**_smi_state(), **stamp, "note": errors[0]}
        except Exception as exc:
            errors.append(f"nvidia-smi: {type(exc).__name__}: {str(exc)[:120]}")
    else:
        errors.append("nvidia-smi: not on PATH")
    return {"source": "unavailable", "reason": "; ".join(errors), **stamp}


def max_sm_clock_mhz() -> float | None:
    """The SM clock the device may reach (``clocks.max.sm``), in MHz; ``None`` when it cannot be read.

    Floors in clock cycles become seconds at this clock: the fewest seconds the cycles can take."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return float(pynvml.nvmlDeviceGetMaxClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM))
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no pynvml or no driver: nvidia-smi below, else None (the record says so)
        pass
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
        return float(out.strip().splitlines()[0])
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return None


def _driver() -> str:
    if not shutil.which("nvidia-smi"):
        return "none (no nvidia-smi)"
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20, check=True).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError) as exc:
        return f"unknown ({type(exc).__name__})"


def provenance(run, section_start: float, script: str = "scripts/gpu_results.py") -> dict:
    """The provenance block: device, driver, versions, commit, date, wall time, clocks now, mode."""
    import torch
    import triton

    from critscale.page import provenance as prov

    cuda = torch.cuda.is_available() and run.device == "cuda"
    props = torch.cuda.get_device_properties(0) if cuda else None
    versions = {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
                **prov.package_versions(("numpy", "scipy", "nvidia-ml-py"))}
    return {
        "device": torch.cuda.get_device_name(0) if cuda else f"CPU smoke run ({platform.machine()})",
        "driver": _driver() if cuda else "none (CPU smoke run)",
        "cuda": torch.version.cuda,
        "multiprocessors": getattr(props, "multi_processor_count", None),
        "max_sm_clock_mhz": max_sm_clock_mhz() if cuda else None,
        "memory_gib": round(props.total_memory / 2**30, 1) if props else None,
        "versions": versions,
        "commit": prov.git_commit(),
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "wall_time_s": round(time.time() - section_start, 2),
        "device_state": device_state(),
        "mode": run.mode,
        "script": script,
        "argv": sys.argv[1:],
    }
