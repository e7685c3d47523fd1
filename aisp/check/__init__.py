"""``aisp.check``: verify and time your own kernel against a reference with the harness.

``aisp.check(fn, ref, inputs=(x, w))`` calls :func:`aisp.check.core.check`: this package's module
is itself callable, so ``aisp.check`` is both the package (``aisp.check.CheckOptions``) and the
function (the API the issue names, without shadowing the package)."""

from __future__ import annotations

import sys
import types
from typing import Any

from aisp.check.core import CheckOptions, check, check_named
from aisp.check.inputs import Usage
from aisp.check.result import EXIT_CODES, CaseResult, CheckResult

__all__ = ["EXIT_CODES", "CaseResult", "CheckOptions", "CheckResult", "Usage", "check", "check_named"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> CheckResult:
        return check(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
