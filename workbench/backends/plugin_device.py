"""A plugin that declares ``inputs="cuda"``: its inputs are torch CUDA tensors of the problem's
dtype, drawn on the device once per point as the torch peers' are, and its launches are timed
by the same GPU sampler as theirs (CUDA graph replay or event pairs on torch's stream, the L2
flush, their warm-up and median), so it compares like with like in a group beside them.

Such a launch queues its kernel on torch's current stream and returns without waiting; the
output stays on the device, and the float64 check copies back only the rows it samples. A
plugin that declares ``compile_cubin`` stores with each point what it compiled to on this GPU
(:mod:`workbench.backends.plugin_compile`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.backends.base import Availability, OpenPoint, PointResult
from workbench.backends.gpu import cupy_device, gpu_machine_info, torch_device
from workbench.backends.plugin_backend import PluginBackend
from workbench.backends.plugin_compile import point_resources
from workbench.backends.torch_base import TorchBackend
from workbench.measure.timing import TimingSettings, TimingStats

NEEDS_GPU = 'inputs="cuda" needs a GPU: '


def device_availability(probe: Callable[[], Availability] | None, label: str) -> Availability:
    """The plugin's own probe (when it gives one) and then what every ``cuda`` plugin needs:
    torch seeing a CUDA GPU, and CuPy, which draws the inputs as it does for the peers."""
    if probe is not None:
        status = probe()
        if not status.available:
            return status
    try:
        import torch  # noqa: F401
    except ImportError:  # torch_device's words for it name the SDPA peers
        return Availability(False, f"{NEEDS_GPU}torch is not installed (pip install torch)")
    for needed in (torch_device(), cupy_device()):
        if not needed.available:
            return Availability(False, f"{NEEDS_GPU}{needed.reason}")
    if probe is not None:
        return status
    return Availability(True, f"plugin {label} on {torch_device().reason}")


class DevicePluginBackend(PluginBackend, TorchBackend):
    """A ``cuda`` plugin: the plugin's callable and checks, the torch peers' inputs, memory
    accounting and sampler."""

    def availability(self) -> Availability:
        return device_availability(self.plugin.probe, self.plugin.label)

    def default_timing(self) -> TimingSettings:
        return TorchBackend.default_timing(self)

    def machine_info(self) -> dict[str, Any]:
        return {**gpu_machine_info(), **PluginBackend.machine_info(self)}

    def host_view(self, tensor: Any) -> Any:
        return TorchBackend.host_view(self, tensor)

    def close_point(self, opened: OpenPoint, timing: TimingStats) -> PointResult:
        result = super().close_point(opened, timing)
        # After the timed region: a cuTile plugin's compile (seconds) never sits in it.
        found = point_resources(
            self.plugin, opened.problem, opened.config, self.knob_values, local_arch()
        )
        if found is not None:
            result.extra["resources"] = found
        return result


def local_arch() -> str:
    """``sm_90`` for the GPU torch uses."""
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"
