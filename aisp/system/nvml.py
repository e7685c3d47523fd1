"""A small NVML facade: every GPU read goes through it, so tests can answer with recorded values.

A call that the driver or GPU does not support, that this user may not make, or that this
``pynvml`` lacks raises :class:`NvmlUnavailable`; checks turn it into SKIP or UNKNOWN, never PASS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

UnavailableKind = Literal["unsupported", "no_permission", "error"]


class NvmlUnavailable(Exception):
    """An NVML value that could not be read; ``kind`` says why."""

    def __init__(self, kind: UnavailableKind, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class Nvml(Protocol):
    """What the checks need from NVML."""

    def device_count(self) -> int: ...

    def device(self, index: int, call: str | Sequence[str], *args: Any) -> Any:
        """``nvmlDevice<call>(handle, *args)``; a tuple of names tries each (newest first)."""

    def bus_id(self, index: int) -> str:
        """The device's PCI bus id as NVML writes it ("00000000:3B:00.0")."""

    def topology(self, a: int, b: int) -> int:
        """``nvmlDeviceGetTopologyCommonAncestor`` of two devices (an NVML_TOPOLOGY_* level)."""

    def system(self, call: str) -> Any:
        """``nvmlSystem<call>()``."""


def _kind(err: Exception) -> UnavailableKind:
    import pynvml

    code = getattr(err, "value", None)
    if code in (pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND):
        return "unsupported"
    if code == pynvml.NVML_ERROR_NO_PERMISSION:
        return "no_permission"
    return "error"


class PyNvml:
    """The real NVML through ``pynvml`` (the nvidia-ml-py package)."""

    def __init__(self) -> None:
        import pynvml

        self._nv = pynvml
        pynvml.nvmlInit()
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]

    def _call(self, names: str | Sequence[str], prefix: str, *args: Any) -> Any:
        for name in (names,) if isinstance(names, str) else names:
            fn = getattr(self._nv, prefix + name, None)
            if fn is None:
                continue
            try:
                return fn(*args)
            except self._nv.NVMLError as err:
                if getattr(err, "value", None) == self._nv.NVML_ERROR_FUNCTION_NOT_FOUND:
                    continue
                raise NvmlUnavailable(_kind(err), f"{prefix}{name}: {err}") from err
        raise NvmlUnavailable("unsupported", f"this pynvml has no {prefix}{names}")

    def device_count(self) -> int:
        return len(self._handles)

    def device(self, index: int, call: str | Sequence[str], *args: Any) -> Any:
        return self._call(call, "nvmlDevice", self._handles[index], *args)

    def bus_id(self, index: int) -> str:
        bus = self.device(index, "GetPciInfo").busId
        return bus.decode() if isinstance(bus, bytes) else str(bus)

    def topology(self, a: int, b: int) -> int:
        return self._call("GetTopologyCommonAncestor", "nvmlDevice", self._handles[a], self._handles[b])

    def system(self, call: str) -> Any:
        value = self._call(call, "nvmlSystem")
        return value.decode() if isinstance(value, bytes) else value


def open_nvml() -> tuple[Nvml | None, str]:
    """The real NVML, or None and the reason it cannot be used here."""
    try:
        import pynvml
    except ImportError:
        return None, "pynvml (nvidia-ml-py) is not installed"
    try:
        return PyNvml(), ""
    except pynvml.NVMLError as err:
        return None, f"NVML could not start: {err}"


class StaticNvml:
    """NVML answered from recorded values: one mapping per device, ``call -> value``.

    A value that is an exception instance is raised; a callable value is called with the call's
    arguments. Used by the tests and for replaying what another machine reported.
    """

    def __init__(self, devices: Sequence[Mapping[str, Any]], system: Mapping[str, Any] | None = None,
                 topology: Mapping[tuple[int, int], int] | None = None) -> None:
        self._devices = devices
        self._system = system or {}
        self._topology = topology or {}

    @staticmethod
    def _answer(table: Mapping[str, Any], names: str | Sequence[str], *args: Any) -> Any:
        for name in (names,) if isinstance(names, str) else names:
            if name in table:
                value = table[name]
                if isinstance(value, BaseException):
                    raise value
                return value(*args) if callable(value) else value
        raise NvmlUnavailable("unsupported", f"no recorded value for {names}")

    def device_count(self) -> int:
        return len(self._devices)

    def device(self, index: int, call: str | Sequence[str], *args: Any) -> Any:
        return self._answer(self._devices[index], call, *args)

    def bus_id(self, index: int) -> str:
        return self._answer(self._devices[index], "bus_id")

    def topology(self, a: int, b: int) -> int:
        key = (min(a, b), max(a, b))
        if key not in self._topology:
            raise NvmlUnavailable("unsupported", f"no recorded topology for {key}")
        return self._topology[key]

    def system(self, call: str) -> Any:
        return self._answer(self._system, call)
