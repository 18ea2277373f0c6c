"""What runs a kernel: `check` (record + control plane), `run` (and the data plane), `launch`
(blocks of a grid), and the planes' orchestration with its control-plane cache.
"""

from ._check import CheckResult as CheckResult
from ._check import check as check
from ._check import control_options as control_options
from ._launch import LaunchResult as LaunchResult
from ._launch import launch as launch
from ._planes import CONTROL_CACHE as CONTROL_CACHE
from ._planes import clear_caches as clear_caches
from ._run import Result as Result
from ._run import run as run
