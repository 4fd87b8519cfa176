"""Simulated `nvidia-smi` for simcluster pods (simulation only), after NVIDIA's tool of driver 550.

Lists the GPUs the container was given (the device plugin's `NVIDIA_VISIBLE_DEVICES`, which the
kubelet sets from `simcluster/node/devices.py`), numbered from 0 inside the container as NVML
numbers them, with the readings of the node's DCGM simulator at that moment (asked of the API
server, `simcluster/gpu/driver.py`), so that it agrees with the exporter and the dashboard:

- `nvidia-smi`: the default table (header, one block per GPU, the processes, which a container
  does not see: "No running processes found");
- `nvidia-smi -L` / `--list-gpus`: `GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)`;
- `nvidia-smi --query-gpu=index,name,uuid,utilization.gpu,memory.used,memory.total
  --format=csv[,noheader][,nounits]` (and the other common fields of `--help-query-gpu`);
- `-i` / `--id=ID[,ID]`: only these GPUs (index, UUID or PCI bus id).

A container without GPUs gets "No devices were found" and exit status 6 (NVML's "not found"), an
unknown option or field the tool's own messages and status 2, no answer from the driver (no DCGM
simulator) the tool's "couldn't communicate with the NVIDIA driver" and status 9.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # (not typing's: importing it costs a launch ~3 ms)
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING or __package__:  # (the type checker reads the package's modules)
    from . import _kube
else:  # run by path from the wrapper
    import _kube

NO_DEVICES = 6  # NVML_ERROR_NOT_FOUND
INVALID = 2  # NVML_ERROR_INVALID_ARGUMENT
NO_DRIVER = 9  # NVML_ERROR_DRIVER_NOT_LOADED
DRIVER_FAILED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
                 "the latest NVIDIA driver is installed and running.")
INVALID_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."
WIDTH = 89  # between the outer bars of the default table
RULE = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"


class Usage(Exception):
    pass


# field -> (header, unit, value of a GPU dict); `--help-query-gpu`'s names and their aliases
def _fields() -> dict[str, tuple[str, str, Any]]:
    def f(key: str) -> Any:
        return lambda g: g[key]

    return {
        "index": ("index", "", f("index")),
        "name": ("name", "", f("name")), "gpu_name": ("name", "", f("name")),
        "uuid": ("uuid", "", f("uuid")), "gpu_uuid": ("uuid", "", f("uuid")),
        "pci.bus_id": ("pci.bus_id", "", f("busId")), "gpu_bus_id": ("pci.bus_id", "", f("busId")),
        "driver_version": ("driver_version", "", f("driverVersion")),
        "count": ("count", "", f("count")),
        "persistence_mode": ("persistence_mode", "", lambda g: "Enabled"),
        "compute_mode": ("compute_mode", "", lambda g: "Default"),
        "pstate": ("pstate", "", lambda g: "P0"),
        "fan.speed": ("fan.speed [%]", "%", lambda g: None),
        "temperature.gpu": ("temperature.gpu", "", f("temperature")),
        "utilization.gpu": ("utilization.gpu [%]", "%", f("utilization")),
        "utilization.memory": ("utilization.memory [%]", "%", f("memoryUtilization")),
        "memory.total": ("memory.total [MiB]", "MiB", f("memoryTotal")),
        "memory.used": ("memory.used [MiB]", "MiB", f("memoryUsed")),
        "memory.free": ("memory.free [MiB]", "MiB", lambda g: g["memoryTotal"] - g["memoryUsed"]),
        "power.draw": ("power.draw [W]", "W", lambda g: f"{float(g['powerDraw']):.2f}"),
        "power.limit": ("power.limit [W]", "W", lambda g: f"{float(g['powerLimit']):.2f}"),
        "clocks.sm": ("clocks.current.sm [MHz]", "MHz", f("smClock")),
        "clocks.current.sm": ("clocks.current.sm [MHz]", "MHz", f("smClock")),
        "clocks.mem": ("clocks.current.memory [MHz]", "MHz", f("memClock")),
        "clocks.current.memory": ("clocks.current.memory [MHz]", "MHz", f("memClock")),
        "timestamp": ("timestamp", "", lambda g: time.strftime("%Y/%m/%d %H:%M:%S") + ".000"),
    }


def parse(argv: list[str]) -> dict[str, Any]:
    """The options: list, query (fields), fmt (set of csv flags), ids, help."""
    out: dict[str, Any] = {"list": False, "query": None, "fmt": None, "ids": None, "help": False}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in ("--query-gpu", "-query-gpu", "--format", "-format", "-i", "--id") and not eq:
            i += 1
            if i >= len(argv):
                raise Usage(INVALID_ARGS)
            value = argv[i]
        if arg in ("-L", "--list-gpus"):
            out["list"] = True
        elif arg in ("-h", "--help"):
            out["help"] = True
        elif name in ("--query-gpu", "-query-gpu"):
            out["query"] = value
        elif name in ("--format", "-format"):
            out["fmt"] = {p.strip() for p in value.split(",")}
        elif name in ("-i", "--id"):
            out["ids"] = [p.strip() for p in value.split(",") if p.strip()]
        else:
            raise Usage(f"Unknown option: {arg}\n\n{INVALID_ARGS}")
        i += 1
    if out["query"] is not None and (not out["fmt"] or "csv" not in out["fmt"]):
        raise Usage(INVALID_ARGS)
    return out


def visible() -> list[str]:
    """The UUIDs the container was given."""
    raw = os.environ.get("NVIDIA_VISIBLE_DEVICES", "").strip()
    if raw in ("", "none", "void"):
        return []
    return [u.strip() for u in raw.split(",") if u.strip().startswith("GPU-")]


def gpus(uuids: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The GPUs (index in the container added) and the driver's versions; ApiError when the
    driver cannot be asked."""
    api = _kube.Api.in_pod()
    query = _kube.urlencode([("uuid", ",".join(uuids))])
    code, body = api.request("GET", f"/apis/simcluster.ranks/v1/namespaces/{_kube.quote(_kube.namespace())}/gpus?"
                                    f"{query}", timeout=10)
    if code != 200 or not isinstance(body, dict):
        raise _kube.ApiError(code, _kube.status_message(body, code))
    items = [g for g in body.get("items") or () if isinstance(g, dict)]
    items.sort(key=lambda g: str(g.get("busId")))
    for n, g in enumerate(items):
        g.update(index=n, count=len(items), driverVersion=body.get("driverVersion", ""))
    return items, body


def select(items: list[dict[str, Any]], ids: list[str] | None) -> list[dict[str, Any]]:
    if ids is None:
        return items
    chosen = []
    for ident in ids:
        match = [g for g in items if ident in (str(g["index"]), g["uuid"], g["busId"])
                 or (ident.startswith("GPU-") and g["uuid"].startswith(ident))]
        if not match:
            raise LookupError(f"No devices were found matching the id {ident}" if not ident.isdigit()
                              else f"Invalid device index: {ident}")
        chosen += [g for g in match if g not in chosen]
    return chosen


def csv(items: list[dict[str, Any]], query: str, fmt: set[str]) -> str:
    fields = _fields()
    names = [q.strip() for q in query.split(",") if q.strip()]
    for name in names:
        if name not in fields:
            raise Usage(f'Field "{name}" is not a valid field to query.\n')
    lines = []
    if "noheader" not in fmt:
        lines.append(", ".join(fields[n][0] for n in names))
    for g in items:
        cells = []
        for n in names:
            _, unit, get = fields[n]
            value = get(g)
            if value is None:
                cells.append("[N/A]")
            elif unit and "nounits" not in fmt:
                cells.append(f"{value} {unit}")
            else:
                cells.append(str(value))
        lines.append(", ".join(cells))
    return "\n".join(lines) + "\n"


def table(items: list[dict[str, Any]], driver: dict[str, Any]) -> str:
    version = str(driver.get("driverVersion", ""))
    head = (f" {'NVIDIA-SMI ' + version:<34}{'Driver Version: ' + version:<31}"
            f"{'CUDA Version: ' + str(driver.get('cudaVersion', '')):<23}")
    out = [time.asctime() + " " * 7, "+" + "-" * WIDTH + "+", f"|{head:<{WIDTH}}|",
           "|" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+",
           "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
           "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
           "|                                         |                        |               MIG M. |",
           "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|"]
    for g in items:
        left = f" N/A  {int(g['temperature']):>3}C    P0"
        power = f"{round(float(g['powerDraw']))}W / {round(float(g['powerLimit'])):>4}W "
        memory = f"{g['memoryUsed']}MiB / {g['memoryTotal']:>6}MiB "
        out += [
            f"|{g['index']:>4}  {str(g['name'])[:31]:<31}On  |   {g['busId']} Off |{'0':>21} |",
            f"|{left}{power:>{41 - len(left)}}|{memory:>24}|{g['utilization']:>7}%{'Default':>13} |",
            f"|{'':41}|{'':24}|{'Disabled':>21} |",
            RULE,
        ]
    out += [" " * WIDTH, "+" + "-" * WIDTH + "+", f"|{' Processes:':<{WIDTH}}|",
            f"|{'  GPU   GI   CI        PID   Type   Process name':<{WIDTH - 11}}GPU Memory |",
            f"|{'        ID   ID':<{WIDTH - 11}}Usage      |", "|" + "=" * WIDTH + "|",
            f"|{'  No running processes found':<{WIDTH}}|", "+" + "-" * WIDTH + "+"]
    return "\n".join(out) + "\n"


HELP = """NVIDIA System Management Interface -- v{version}

NVSMI provides monitoring information for Tesla and select Quadro devices.

nvidia-smi [OPTION1 [ARG1]] [OPTION2 [ARG2]] ...

    -h,   --help                Print usage information and exit.

  LIST OPTIONS:

    -L,   --list-gpus           Display a list of GPUs connected to the system.

  SUMMARY OPTIONS:

    -i,   --id=                 Target a specific GPU.

  SELECTIVE QUERY OPTIONS:

    --query-gpu                 Information about GPU.
                                Call --help-query-gpu for more info.
    --format=                   Comma separated list of format options:
                                  csv - comma separated values (MANDATORY)
                                  noheader - skip the first line with column headers
                                  nounits - don't print units for numerical values
"""


def main(argv: list[str] | None = None) -> int:
    try:
        opts = parse(sys.argv[1:] if argv is None else argv)
    except Usage as exc:
        print(str(exc))
        return INVALID
    if opts["help"]:
        print(HELP.format(version="550.54.15"), end="")
        return 0
    uuids = visible()
    if not uuids:
        print("No devices were found")
        return NO_DEVICES
    try:
        items, driver = gpus(uuids)
    except _kube.ApiError:
        print(DRIVER_FAILED)
        return NO_DRIVER
    if not items:
        print("No devices were found")
        return NO_DEVICES
    try:
        items = select(items, opts["ids"])
        if opts["list"]:
            sys.stdout.write("".join(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})\n" for g in items))
        elif opts["query"] is not None:
            sys.stdout.write(csv(items, opts["query"], opts["fmt"]))
        else:
            sys.stdout.write(table(items, driver))
    except Usage as exc:
        print(str(exc))
        return INVALID
    except LookupError as exc:
        print(str(exc))
        return NO_DEVICES
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BrokenPipeError, KeyboardInterrupt):  # `| head`, Ctrl-C: end quietly
        sys.exit(1)
