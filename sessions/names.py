"""Workload names, checked before anything reaches the cluster, with Kubernetes' own messages.

The job name is only the start: the operators derive Services, hostnames and label values from it
(`NAME-worker-3` per replica in training-operator, the headless Service `NAME` and the launcher
Job `NAME-launcher` in mpi-operator). Services must be DNS-1035 labels (a letter first) of at most
63 characters, so the name is checked as a DNS-1035 label and must leave room for the longest
derived name: the limit is 63 minus the longest suffix the operator appends for this job.
"""

from __future__ import annotations

import re

from monitors.connection import ExitCode

from .errors import SessionError

MAX_LABEL = 63
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

# What each framework's operator appends to the job name (the replica's index goes after a '-').
ROLE_SUFFIXES = {
    "mpi": ("-launcher", "-worker"),
    "pytorch": ("-master", "-worker"),
    "tensorflow": ("-chief", "-worker"),
    "xgboost": ("-master", "-worker"),
}


def longest_suffix(framework: str, workers: int) -> str:
    """The longest suffix the operator appends to the job name for derived Services/hostnames:
    `-worker-<highest index>` (e.g. `-worker-15` for 16 workers), or `-launcher` (MPI)."""
    top = max(workers - 1, 0)
    out = ""
    for role in ROLE_SUFFIXES.get(framework, ("-worker",)):
        suffix = role if role == "-launcher" else f"{role}-{top if role == '-worker' else 0}"
        if len(suffix) >= len(out):  # a tie: the worker name, the one users recognise
            out = suffix
    return out


def max_name_length(framework: str, workers: int) -> int:
    return MAX_LABEL - len(longest_suffix(framework, workers))


def name_problem(name: str, framework: str = "pytorch", workers: int = 1) -> str | None:
    """Why `name` cannot name a `framework` job with `workers` workers (None: it can)."""
    if not name:
        return "a name is required"
    limit = max_name_length(framework, workers)
    if len(name) > limit:
        suffix = longest_suffix(framework, workers)
        return (f"must be no more than {limit} characters ({len(name)} given): the operator derives Service "
                f"and host names such as NAME{suffix} from it, and those must fit in {MAX_LABEL} "
                "characters (a DNS label)")
    if not DNS1035_LABEL.match(name):
        return DNS1035_MSG
    return None


def check_name(name: str, framework: str = "pytorch", workers: int = 1) -> None:
    problem = name_problem(name, framework, workers)
    if problem is not None:
        raise SessionError(f'invalid name "{name}": {problem}', ExitCode.USAGE)


def subdomain_problem(value: str) -> str | None:
    """A DNS-1123 subdomain (names of PVCs, Secrets, ConfigMaps)."""
    if not value:
        return "a name is required"
    if len(value) > 253:
        return "must be no more than 253 characters"
    return None if DNS1123_SUBDOMAIN.match(value) else DNS1123_SUBDOMAIN_MSG


def label_value_problem(value: str) -> str | None:
    if len(value) > MAX_LABEL:
        return f"must be no more than {MAX_LABEL} characters"
    return None if LABEL_VALUE.match(value) else LABEL_VALUE_MSG
