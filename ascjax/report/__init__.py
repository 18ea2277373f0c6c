"""The report layer: findings into words, the timeline (summary, Perfetto trace, picture), the
cross-core event table, seed 002's six checks and the run warnings, read from the record's template and the control
plane's result.
"""

from ._event_table import event_table as event_table
from ._explain import CHECK_NAMES as CHECK_NAMES
from ._explain import Check as Check
from ._explain import Explained as Explained
from ._explain import explain as explain
from ._finding_words import FindingText as FindingText
from ._finding_words import describe as describe
from ._report import Report as Report
from ._run_warnings import run_warnings as run_warnings
from ._timeline import Timeline as Timeline
from ._timeline import summary_text as summary_text
