"""GPU readings that take nothing from the GPU: NVML (through an injected reader), nvidia-smi
(the driver's own output on a real H200, tests/fixtures/nvidia-smi-h200/), torch only in a
short-lived subprocess; CUDA_VISIBLE_DEVICES by index and UUID; MIG named; svcdiag never its
own foreign holder."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from svcdiag.config.service import UnitsDir
from svcdiag.errors import SvcdiagError
from svcdiag.ops.host import gpumem
from svcdiag.ops.host.gpu_hygiene import foreign_holders, own_pids, parse_apps, parse_gpus
from svcdiag.ops.host.gpumem import Device, PynvmlReader, gpu_free_gb, nvml_free, parse_nvidia_smi, visible

from .conftest import UNITS

H200 = Path(__file__).parent / "fixtures" / "nvidia-smi-h200"
UUID = "GPU-83933027-18a0-f419-eda4-bef8f81c4896"
MiB = 1024**2


def smi(name: str) -> str:
    return (H200 / name).read_text()


def cfg(**kw):
    return dataclasses.replace(UnitsDir(UNITS, "t").load("nospec-tp1"), **kw)


class FakeNvml:
    def __init__(self, *devices: Device):
        self._devices = list(devices)

    def devices(self) -> list[Device]:
        return list(self._devices)


def h200(index: int = 0, uuid: str = UUID, free_mib: int = 143771 - 31771, **kw) -> Device:
    return Device(index, uuid, 143771 * MiB, free_mib * MiB, (143771 - free_mib) * MiB, **kw)


def test_the_h200s_nvidia_smi_is_read_as_the_driver_wrote_it() -> None:
    assert parse_nvidia_smi(smi("smi-idle-gpu.txt"), [0]) == pytest.approx(143771 / 1024)
    assert parse_nvidia_smi(smi("smi-held30-gpu.txt"), [0]) == pytest.approx((143771 - 31771) / 1024)
    gpus = parse_gpus(smi("smi-idle-uuid.txt"))
    assert gpus == {UUID: 0}
    assert parse_apps(smi("smi-held30-apps.txt"), gpus) == [(428, 0, 518 / 1024), (461, 0, 31238 / 1024)]
    # memory.free, when asked for, leaves out what the driver reserves (616 MiB on this H200)
    with_free = "memory.total [MiB], memory.used [MiB], memory.free [MiB]\n143771 MiB, 527 MiB, 142630 MiB\n"
    assert parse_nvidia_smi(with_free, [0]) == pytest.approx(142630 / 1024)


def test_nvml_through_an_injected_module_creates_no_context() -> None:
    calls: list[str] = []

    class Err(Exception):
        pass

    def proc(pid: int, used: int) -> SimpleNamespace:
        return SimpleNamespace(pid=pid, usedGpuMemory=used)

    fake = SimpleNamespace(
        NVMLError=Err,
        nvmlInit=lambda: calls.append("init"), nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: 2, nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetUUID=lambda h: [UUID, b"GPU-ffff"][h],
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=143771 * MiB, free=(112000 - h) * MiB,
                                                          used=(31771 + h) * MiB),
        nvmlDeviceGetMigMode=lambda h: (0, 0) if h == 0 else (_ for _ in ()).throw(Err("not supported")),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [proc(461, 31238 * MiB)] if h == 0 else [],
    )
    devs = PynvmlReader(fake).devices()
    assert calls == ["init", "shutdown"]
    assert [(d.index, d.uuid, d.mig, d.processes) for d in devs] == [
        (0, UUID, False, ((461, 31238 * MiB),)), (1, "GPU-ffff", False, ())]


def test_cuda_visible_devices_by_index_and_uuid_as_cuda_reads_it() -> None:
    a, b, c = h200(0, "GPU-aaaa-1"), h200(1, "GPU-bbbb-2"), h200(2, "GPU-cccc-3")
    assert visible(None, [a, b, c]) == [a, b, c]
    assert visible("2,0", [a, b, c]) == [c, a]
    assert visible("GPU-bbbb,GPU-aaaa-1", [a, b, c]) == [b, a]  # a UUID prefix names one GPU
    assert visible("1,7,0", [a, b, c]) == [b]  # CUDA stops at the first entry that names none
    assert visible("GPU-", [a, b, c]) == []  # ambiguous: none
    assert visible("1,1", [a, b, c]) == [b]


def test_nvml_gives_the_smallest_free_of_the_ranks_gpus_and_names_mig() -> None:
    reader = FakeNvml(h200(0, free_mib=140000), h200(1, "GPU-b", free_mib=100000), h200(2, "GPU-c", free_mib=1))
    two = cfg(tp_size=2, gpus=(0, 1))
    assert nvml_free(two, reader) == (round(100000 / 1024, 2), "NVML (GPUs 0, 1, now)")
    assert nvml_free(cfg(gpus=(0,)), reader) == (round(140000 / 1024, 2), "NVML (GPUs 0, now)")
    assert nvml_free(cfg(gpus=(5,)), reader) is None  # no such GPU: nvidia-smi's turn
    mig = FakeNvml(h200(0, mig=True))
    with pytest.raises(SvcdiagError, match=r"GPU 0 \(GPU-83933027-18a0-f419-eda4-bef8f81c4896\) is in MIG mode"):
        nvml_free(cfg(gpus=(0,)), mig)
    # NVML first: no nvidia-smi or torch is asked when it answers
    got = gpu_free_gb(cfg(gpus=(0,)), None, nvml=lambda: FakeNvml(h200(0, free_mib=143771 - 31771)))
    assert got == (109.38, "NVML (GPUs 0, now)")


def test_torch_only_in_a_short_lived_subprocess_of_the_units_interpreter(monkeypatch) -> None:
    seen: dict[str, object] = {}

    def run(argv, **kw):
        seen.update(argv=argv, env=kw["env"])
        return subprocess.CompletedProcess(argv, 0, stdout=f"[{150 * 1024**3}, {140 * 1024**3}, {1}]\n", stderr="")

    c = cfg(tp_size=2, gpus=(3, 1), python="/opt/sglang/.venv/bin/python")
    assert gpumem.torch_subprocess(c, run) == 140.0  # the smallest of the two ranks' GPUs
    assert seen["argv"][:2] == ["/opt/sglang/.venv/bin/python", "-c"]  # type: ignore[index]
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "3,1"  # type: ignore[index]
    failed = gpumem.torch_subprocess(c, lambda argv, **kw: subprocess.CompletedProcess(argv, 1, "", "no torch"))
    assert failed is None


def test_svcdiag_never_imports_torch_in_its_own_process() -> None:
    root = Path(gpumem.__file__).resolve().parent.parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if re.search(r"^\s*(import torch|from torch)", p.read_text(), re.M)]
    assert offenders == []


def test_hygiene_never_names_svcdiag_or_its_children(tmp_path: Path) -> None:
    me = os.getpid()
    proc = tmp_path / "proc"
    for pid, ppid, cgroup in ((me, 1, "0::/user.slice/session-1.scope"), (4242, me, "0::/user.slice/session-1.scope"),
                              (4243, 4242, "0::/user.slice/session-1.scope"),
                              (461, 1, "0::/system.slice/notebook.service"),
                              (428, 1, "0::/system.slice/nospec-tp1.service")):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "stat").write_text(f"{pid} (py thon) S {ppid} 1 1 0\n")
        (proc / str(pid) / "cgroup").write_text(cgroup + "\n")
    assert own_pids(proc, me) == {me, 4242, 4243}
    reader = FakeNvml(h200(0, processes=((me, 518 * MiB), (4243, 518 * MiB), (461, 31238 * MiB),
                                         (428, 1000 * MiB))),
                      h200(1, "GPU-other", processes=((999, 5 * MiB),)))
    holders = foreign_holders(cfg(gpus=(0,)), proc, nvml=lambda: reader)
    assert [(h.pid, h.gpu, h.unit) for h in holders] == [(461, 0, "notebook.service")]  # 428 is the unit's own
    assert holders[0].gb == round(31238 / 1024, 2)


def test_the_gpus_capacity_for_sglangs_automatic_fraction() -> None:
    from svcdiag.ops.host.gpumem import gpu_total_gb

    reader = FakeNvml(h200(0), h200(1, "GPU-b"))
    assert gpu_total_gb(cfg(gpus=(1,)), nvml=lambda: reader) == pytest.approx(143771 / 1024)

    class Conn:
        target = "gpu-x"

        def run(self, command: str, **kw):
            return subprocess.CompletedProcess(command, 0, b"memory.total [MiB]\n143771 MiB\n81559 MiB\n", b"")

    assert gpu_total_gb(cfg(gpus=(1,)), Conn()) == pytest.approx(81559 / 1024)
