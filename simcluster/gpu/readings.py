"""What one simulated GPU reads at a given load: temperature, power, clocks, throttle reasons and
error counters, and how a node's exporter is set up (MIG devices, extra counters, pod labels).

The figures follow the load: power and temperature rise with utilisation, a GPU that runs hot (a
node's ``simcluster.ranks/gpu-hot`` lists the indexes that are badly cooled: up to 22 C more) slows its
SM clock from 85 C (``sw_thermal``) and more from 90 C (``hw_slowdown``, ``hw_thermal``); a GPU at
its power limit is capped (``power_cap``); an idle one reads ``gpu_idle`` (DCGM's clock-event
reasons, as dcgm-exporter's clock-events collector names them).

A node's labels choose how its exporter runs (the GPU operator's settings on a real node):

- ``simcluster.ranks/dcgm-counters: default``: only the fields of dcgm-exporter's
  ``etc/default-counters.csv`` (no clock-event reasons, power limit or ECC counts); otherwise the
  exporter also serves `EXTRA_METRICS`, as a custom counters ConfigMap would enable them;
- ``simcluster.ranks/dcgm-pod-labels: "false"``: the exporter runs without the kubelet's
  pod-resources socket mounted, so its series carry no ``pod``/``namespace``/``container``;
- ``nvidia.com/mig.config: all-3g.40gb`` (the MIG manager's label; single strategy): each physical
  GPU is split into ``MIG_PER_GPU`` instances, each one ``nvidia.com/gpu`` of the node's capacity,
  served with ``GPU_I_PROFILE``/``GPU_I_ID`` beside the physical GPU's ``gpu`` and ``UUID``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HOT_LABEL = "simcluster.ranks/gpu-hot"
COUNTERS_LABEL = "simcluster.ranks/dcgm-counters"
POD_LABELS_LABEL = "simcluster.ranks/dcgm-pod-labels"
MIG_LABEL = "nvidia.com/mig.config"
MIG_PROFILES = {"all-3g.40gb": ("3g.40gb", 2), "all-1g.10gb": ("1g.10gb", 7)}
HOT_EXTRA_C = 22
THERMAL_SLOWDOWN_C = 85
HW_SLOWDOWN_C = 90

# DCGM clock-event reason bits (DCGM_CLOCKS_EVENT_REASON_*; dcgm-exporter's clock_events_collector)
GPU_IDLE = 0x1
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SW_THERMAL = 0x20
HW_THERMAL = 0x40

# Fields beyond the default counters (commented out there, or not listed), with their exporter help
EXTRA_METRICS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask)."),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Power management limit (in W)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
)


@dataclass(frozen=True)
class Layout:
    """How a node's exporter serves its GPUs."""

    extra_counters: bool = True
    pod_labels: bool = True
    mig_profile: str = ""  # e.g. 3g.40gb; "" without MIG
    mig_per_gpu: int = 1

    def device(self, index: int) -> tuple[int, int | None]:
        """(physical GPU, GPU instance id or None) of the node's device `index` (an `nvidia.com/gpu`)."""
        if not self.mig_profile:
            return index, None
        return index // self.mig_per_gpu, index % self.mig_per_gpu + 1


def layout_of(node: dict[str, Any]) -> Layout:
    labels = (node.get("metadata") or {}).get("labels") or {}
    profile, per = MIG_PROFILES.get(str(labels.get(MIG_LABEL, "")), ("", 1))
    return Layout(extra_counters=labels.get(COUNTERS_LABEL) != "default",
                  pod_labels=labels.get(POD_LABELS_LABEL) != "false", mig_profile=profile, mig_per_gpu=per)


def hot_gpus(node: dict[str, Any]) -> frozenset[int]:
    text = str(((node.get("metadata") or {}).get("labels") or {}).get(HOT_LABEL, ""))
    return frozenset(int(p) for p in text.replace(",", ".").split(".") if p.strip().isdigit())


@dataclass(frozen=True)
class Health:
    power_w: float
    temp_c: int
    sm_clock: int
    reasons: int  # clock-event bitmask


def health(idle_w: float, max_w: float, full_clock: int, util: float, *, hot: bool = False) -> Health:
    """A GPU's power (W), temperature (C), SM clock (MHz) and clock-event reasons at `util` %."""
    u = max(0.0, min(100.0, util)) / 100.0
    power = idle_w + (max_w - idle_w) * u
    temp = round(31 + 44 * u + (HOT_EXTRA_C * u if hot else 0))
    reasons = 0
    clock = full_clock if util > 0 else 345
    if util <= 0:
        reasons |= GPU_IDLE
    if power >= 0.98 * max_w:
        reasons |= SW_POWER_CAP
    if temp >= THERMAL_SLOWDOWN_C:
        reasons |= SW_THERMAL
        clock = round(full_clock * 0.8)
    if temp >= HW_SLOWDOWN_C:
        reasons |= HW_SLOWDOWN | HW_THERMAL
        clock = round(full_clock * 0.55)
    return Health(power, temp, clock, reasons)


def xid_applies(text: str, env: dict[str, str]) -> tuple[str, bool]:
    """An XID annotation ``CODE[@SECONDS][;VAR=VALUE]``: (``CODE[@SECONDS]``, whether this pod's
    container environment has VAR=VALUE, or True without a condition): the demo's failing rank."""
    code, sep, cond = text.partition(";")
    if not sep:
        return code, True
    var, _, value = cond.partition("=")
    return code, env.get(var.strip()) == value.strip()


def container_env(pod: dict[str, Any], container: str) -> dict[str, str]:
    for c in (pod.get("spec") or {}).get("containers") or ():
        if isinstance(c, dict) and c.get("name") == container:
            return {str(e.get("name")): str(e.get("value", "")) for e in c.get("env") or () if isinstance(e, dict)}
    return {}
