"""What a plugin that declares ``inputs="cuda"`` needs of this machine, and the GPU it runs on.

Such a plugin (:class:`workbench.backends.plugin_backend.DevicePluginBackend`) gets torch CUDA
tensors of the problem's dtype, drawn on the device once per point as the torch peers' are, and
its launches are timed by the same GPU sampler as theirs (CUDA graph replay or event pairs on
torch's stream, the L2 flush, their warm-up and median), so it compares like with like in a
group beside them. Its launch queues its kernel on torch's current stream and returns without
waiting; the output stays on the device, and the float64 check copies back only the rows it
samples.
"""

from __future__ import annotations

from collections.abc import Callable

from workbench.backends.base import Availability
from workbench.backends.gpu import cupy_device, torch_device

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


def local_arch() -> str:
    """``sm_90`` for the GPU torch uses."""
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"
