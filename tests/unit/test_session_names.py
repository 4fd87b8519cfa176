"""sessions/names.py: job names, checked against what each framework's pods add to them."""

from __future__ import annotations

import pytest

from sessions.errors import SessionError
from sessions.names import (
    DNS1035_MSG,
    check_name,
    label_value_problem,
    longest_suffix,
    max_name_length,
    name_problem,
    subdomain_problem,
)

# -- names -----------------------------------------------------------------------------------------


def test_longest_suffix_per_framework() -> None:
    assert longest_suffix("pytorch", 16) == "-worker-15"
    assert longest_suffix("pytorch", 0) == "-worker-0"
    assert longest_suffix("tensorflow", 1) == "-worker-0"  # longer than -chief-0
    assert longest_suffix("mpi", 1) == "-worker-0"  # as long as -launcher: the worker's name wins a tie
    assert longest_suffix("mpi", 10) == "-worker-9"
    assert longest_suffix("mpi", 11) == "-worker-10"
    assert longest_suffix("xgboost", 1000) == "-worker-999"
    assert max_name_length("pytorch", 16) == 63 - len("-worker-15") == 53
    assert max_name_length("pytorch", 1) == 54


def test_name_problem() -> None:
    for ok in ("sess", "a", "mnist-ddp-2", "a" * 54):
        assert name_problem(ok, "pytorch", 1) is None, ok
    assert name_problem("") == "a name is required"
    for bad in ("Mnist", "9lives", "-sess", "sess-", "my_job", "my.job", "sess\x1b"):
        assert name_problem(bad) == DNS1035_MSG, bad
    too_long = name_problem("a" * 55, "pytorch", 1)
    assert too_long is not None and too_long.startswith("must be no more than 54 characters (55 given)")
    assert "NAME-worker-0" in too_long and "63" in too_long


def test_check_name_raises_a_usage_error() -> None:
    check_name("fine")
    with pytest.raises(SessionError) as err:
        check_name("Not-Fine", "mpi", 2)
    assert err.value.code == 2 and err.value.message == f'invalid name "Not-Fine": {DNS1035_MSG}'


def test_subdomain_and_label_value() -> None:
    assert subdomain_problem("data.v1-2") is None
    assert subdomain_problem("") == "a name is required"
    assert subdomain_problem("a" * 254) == "must be no more than 253 characters"
    for bad in ("Data", "data_1", ".data", "data."):
        assert (subdomain_problem(bad) or "").startswith("a lowercase RFC 1123 subdomain"), bad
    for ok in ("", "alice", "My_Value-1.2", "a" * 63):
        assert label_value_problem(ok) is None, ok
    assert label_value_problem("a" * 64) == "must be no more than 63 characters"
    for bad in ("alice@example.com", "-a", "a-", "a b"):
        assert (label_value_problem(bad) or "").startswith("a valid label must be"), bad


