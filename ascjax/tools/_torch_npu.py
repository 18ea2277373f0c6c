"""``torch.npu`` on the CPU: what a PyPTO-Pro test file asks of the device, answered by ascjax.

A test builds its tensors on ``"npu:0"``, calls the kernel, synchronises and compares with ``torch`` on the CPU.
Inside ``npu_on_cpu`` a tensor asked for on an NPU is made on the CPU (the factories and ``Tensor.to``
take ``device="npu:N"`` as the CPU, ``torch.empty`` on an NPU is zeros as the emulator's GM is, ``Tensor.npu()``
is the tensor itself; ``import torch_npu`` imports a stand-in whose every name is refused), and ``torch.npu`` answers
as an
Ascend device: ``set_device`` and ``synchronize`` have nothing to wait for (the emulator has finished when the
kernel call returns), ``get_device_name`` names the chip the kernels run on. torch is an optional extra
(``pip install 'ascjax[torch]'``); nothing else of torch changes.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types

#: torch's factories that take ``device=`` (the ones PyPTO-Pro test files call)
FACTORIES = (
    "arange", "empty", "empty_like", "eye", "full", "full_like", "linspace", "ones", "ones_like", "rand", "rand_like",
    "randint", "randn", "randn_like", "randperm", "tensor", "zeros", "zeros_like", "as_tensor",
)  # fmt: skip
#: the factories of uninitialised tensors, and the zeroed ones an NPU tensor comes from instead
UNINITIALISED = {"empty": "zeros", "empty_like": "zeros_like"}
#: what ``torch.npu.get_device_name`` answers, by ascjax chip (test files check for "Ascend950")
DEVICE_NAMES = {"950": "Ascend950PR (ascjax emulator)", "a3": "Ascend910_93 (ascjax emulator)",
                "a2": "Ascend910B (ascjax emulator)"}  # fmt: skip


def _on_cpu(device):
    """``device`` with an NPU named as the CPU."""
    return "cpu" if isinstance(device, str) and device.split(":")[0] == "npu" else device


def _npu_namespace(chip: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        set_device=lambda device=None: None,
        synchronize=lambda device=None: None,
        get_device_name=lambda device=None: DEVICE_NAMES[chip],
        current_device=lambda: 0,
        device_count=lambda: 1,
        is_available=lambda: True,
        manual_seed=lambda seed: None,
    )


class UnmappedTorchNpu(AttributeError):
    """A name of ``torch_npu`` ascjax does not map (NPU tensor formats, NPU operators)."""


def _torch_npu_module() -> types.ModuleType:
    """``import torch_npu``: the import a test makes to register the NPU backend (``npu_on_cpu`` stands for it);
    any name used from it is refused by name."""
    module = types.ModuleType("torch_npu", "torch_npu on the CPU (ascjax): the import registers nothing to register")

    def missing(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnmappedTorchNpu(
            f"torch_npu.{name} is not mapped by ascjax (NPU tensor formats and operators have no CPU stand-in)"
        )

    module.__getattr__ = missing
    return module


@contextlib.contextmanager
def npu_on_cpu(chip: str = "950"):
    """Inside the block, ``torch.npu`` and tensors on ``"npu:N"`` are the CPU's (see the module's docstring)."""
    import torch

    saved = {name: getattr(torch, name) for name in FACTORIES if hasattr(torch, name)}
    saved_npu, saved_to = getattr(torch, "npu", None), torch.Tensor.to
    had_npu_method = hasattr(torch.Tensor, "npu")

    def factory(name, fn):
        # GM the kernel has not written holds zeros in the emulator: an uninitialised NPU tensor is zeros too
        zeroed = saved.get(UNINITIALISED.get(name))

        @functools.wraps(fn)
        def made(*args, **kwargs):
            if "device" in kwargs and _on_cpu(kwargs["device"]) != kwargs["device"]:
                kwargs["device"] = "cpu"
                if zeroed is not None:
                    return zeroed(*args, **kwargs)
            return fn(*args, **kwargs)

        return made

    @functools.wraps(saved_to)
    def to(self, *args, **kwargs):
        args = tuple(_on_cpu(a) for a in args)
        if "device" in kwargs:
            kwargs["device"] = _on_cpu(kwargs["device"])
        return saved_to(self, *args, **kwargs)

    saved_module = sys.modules.get("torch_npu")
    try:
        for name, fn in saved.items():
            setattr(torch, name, factory(name, fn))
        sys.modules["torch_npu"] = _torch_npu_module()
        torch.npu = _npu_namespace(chip)
        torch.Tensor.to = to
        torch.Tensor.npu = lambda self, *args, **kwargs: self
        yield torch
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)
        if saved_module is None:
            sys.modules.pop("torch_npu", None)
        else:
            sys.modules["torch_npu"] = saved_module
        if saved_npu is None:
            del torch.npu
        else:
            torch.npu = saved_npu
        torch.Tensor.to = saved_to
        if not had_npu_method:
            del torch.Tensor.npu
