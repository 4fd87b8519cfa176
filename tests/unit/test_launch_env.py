"""Secrets in a launch kept out of the job's spec, and the environment its shell exported carried
into it (issue #25, item 4): sessions.launch_env without a cluster."""

from __future__ import annotations

import pytest

from monitors.connection import ExitCode
from sessions.errors import SessionError
from sessions.history import parse_history, runs_of
from sessions.launch_env import (
    MASK,
    Exports,
    in_command,
    is_secret_name,
    mask_command,
    prepare,
)

T0 = 1_767_225_600


@pytest.mark.parametrize(("name", "secret"), [
    ("HF_TOKEN", True), ("WANDB_API_KEY", True), ("AWS_SECRET_ACCESS_KEY", True), ("DB_PASSWORD", True),
    ("GITHUB_PAT_TOKEN", True), ("MY_APIKEY", True), ("OPENAI_KEY", True), ("PGPASSWD", True),
    ("TOKENIZERS_PARALLELISM", False), ("KEY_FILE", False), ("HF_TOKEN_PATH", False), ("NCCL_DEBUG", False),
    ("SSH_KEY_DIR", False), ("SECRET_NAME", False), ("MONKEY_PATCH", False),
])
def test_a_secret_is_known_by_its_names_words(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


LAUNCH = ("HF_TOKEN=hf_abc123 NCCL_DEBUG=INFO torchrun --nnodes=2 train.py --password 'p@ss word' "
          "--wandb-key=wk_999 --num-keys 3 --key-file /etc/k --api-key sk-1")


def test_secrets_in_a_command_are_found_and_never_shown() -> None:
    found = in_command(LAUNCH)
    assert [(s.where, s.var, s.value) for s in found] == [
        ("HF_TOKEN=", "HF_TOKEN", "hf_abc123"), ("--password", "PASSWORD", "p@ss word"),
        ("--wandb-key", "WANDB_KEY", "wk_999"), ("--api-key", "API_KEY", "sk-1")]
    shown = mask_command(LAUNCH)
    for s in found:
        assert s.value not in shown
    assert shown.count(MASK) == 4 and "NCCL_DEBUG=INFO" in shown and "--num-keys 3 --key-file /etc/k" in shown


def test_a_launch_with_secrets_is_refused_without_a_secret_or_leave() -> None:
    with pytest.raises(SessionError) as err:
        prepare(LAUNCH)
    assert err.value.code == ExitCode.USAGE
    message = err.value.message
    assert "HF_TOKEN=, --password, --wandb-key, --api-key" in message and "--secret-env NAME" in message
    assert "--allow-secrets" in message and "hf_abc123" not in message and "p@ss" not in message


def test_secrets_go_into_the_secret_the_env_refers_to() -> None:
    prep = prepare(LAUNCH, secret="pt-train-secrets")
    assert prep.command == ('NCCL_DEBUG=INFO torchrun --nnodes=2 train.py --password "$PASSWORD" '
                            '--wandb-key="$WANDB_KEY" --num-keys 3 --key-file /etc/k --api-key "$API_KEY"')
    assert prep.secret_data == {"HF_TOKEN": "hf_abc123", "PASSWORD": "p@ss word", "WANDB_KEY": "wk_999",
                                "API_KEY": "sk-1"}
    assert prep.env[0] == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "pt-train-secrets",
                                                                               "key": "HF_TOKEN"}}}
    assert all(v not in str(prep.env) and v not in " ".join(prep.notes()) for v in prep.secret_data.values())


def test_with_leave_they_stay_as_typed() -> None:
    prep = prepare(LAUNCH, allow=True)
    assert prep.command == LAUNCH and prep.secret is None and prep.values == ["hf_abc123", "p@ss word", "wk_999",
                                                                               "sk-1"]


def test_the_shells_exports_are_carried_those_it_computed_named_with_why() -> None:
    history = "".join(f"{T0 + i}\t0\t{line}\n" for i, line in enumerate([
        "export NCCL_DEBUG=INFO OMP_NUM_THREADS=4",
        "export HF_TOKEN=hf_from_export",
        "export HOSTTAG=$(hostname)",
        "DATA=/data; export DATA",
        "export GONE=1; unset GONE",
        "export MASTER_ADDR=elsewhere",  # the operator's own: the new job's is right
        "source ./env.sh",
        "LOCAL_ONLY=1",
        "torchrun train.py",
    ]))
    (run,) = runs_of(parse_history(history))
    assert run.exports.sourced == ("./env.sh",)
    with pytest.raises(SessionError):
        prepare(run.command, run.exports)  # the exported token is a secret too
    prep = prepare(run.command, run.exports, secret="s")
    assert prep.command == "torchrun train.py"
    assert [e["name"] for e in prep.env] == ["NCCL_DEBUG", "OMP_NUM_THREADS", "DATA", "HF_TOKEN"]
    assert prep.env[:3] == [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "OMP_NUM_THREADS", "value": "4"},
                            {"name": "DATA", "value": "/data"}]
    assert prep.secret_data == {"HF_TOKEN": "hf_from_export"}
    notes = " ".join(prep.notes())
    assert "NCCL_DEBUG=INFO, OMP_NUM_THREADS=4, DATA=/data" in notes
    assert "HOSTTAG (its value is computed in the shell: $(hostname))" in notes
    assert "what `source ./env.sh` set (ranks cannot tell)" in notes
    assert "LOCAL_ONLY" not in notes and "GONE" not in notes and "MASTER_ADDR" not in notes
    assert "hf_from_export" not in notes


def test_no_secret_and_no_export_changes_nothing() -> None:
    prep = prepare("horovodrun -np 2 python train.py", Exports())
    assert (prep.command, prep.env, prep.secret, prep.notes()) == ("horovodrun -np 2 python train.py", [], None, [])
