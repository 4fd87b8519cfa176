"""What a log engine is asked to read and how (`LogOptions`): shared by the engine and its streams."""

from __future__ import annotations

from dataclasses import dataclass

from .buffer import DEFAULT_CAP, DEFAULT_RANK_CAP
from .filters import LineFilter

DEFAULT_MAX_STREAMS = 256


@dataclass
class LogOptions:
    follow: bool = False
    since_seconds: int | None = None
    tail: int | None = None  # the newest N merged lines of the history (each container is asked for N)
    previous: bool = False  # the previous (crashed) instance of each container; no following
    filter: LineFilter | None = None  # ranks/roles choose the streams; regexes are for views
    containers: tuple[str, ...] = ()  # only these containers (default: all)
    grace: float = 0.035  # following: a stream quiet this long (s) holds back no line that waited as long
    window: float = 0.25  # following: the longest a line is held for other streams (s; a skewed clock's cap)
    collapse: bool = False  # identical lines of several ranks within the window -> one line "xN ranks"
    cap: int = DEFAULT_CAP  # lines in the merged buffer
    rank_cap: int = DEFAULT_RANK_CAP  # lines kept per rank
    max_streams: int = DEFAULT_MAX_STREAMS
    read_timeout: float = 30.0  # no byte for this long: the stream is reopened from its last timestamp
    # a history read (and every answer's headers) silent this long has stalled: asked again, then given
    # up on (the CLI's --request-timeout; None: read_timeout)
    history_timeout: float | None = None
    probe_after: float = 3.0  # following: a stream quiet this long is checked against the newest line (0: never)
    connect_timeout: float = 15.0
    history_retries: int = 5  # transient errors (429, 5xx, no answer) of a history read, retried with backoff
    backoff_min: float = 0.25
    backoff_max: float = 5.0
    # a rank that keeps failing is given up on after this long: credentials rejected (401) while
    # following ends the follow; a history read failing (5xx, stalls) ends with its error; a followed
    # rank whose pod has finished but whose log cannot be read is an error
    give_up_after: float = 30.0
    failure_notices: bool = True  # a rank whose log cannot be read is also a notice (the CLI reports at the end)
    high_water: int = 4096  # lines pending per stream in the exact merge before it waits
