"""A rank's ports read in its pod (`sessions.ports`): the listing's lines met (sockets to processes),
what a port probably is, Jupyter's token, kubectl's port arguments and the SSH door's destinations."""

from __future__ import annotations

import pytest

from sessions.portforward import ForwardError, listen_addresses, parse_pairs
from sessions.ports import jupyter_token, kind_of, parse_listing, port_rows
from sessions.ssh.forwarding import Destination, destination

LISTING = """L 0100007F:1F90 111
L 0A00800A:22B8 222
L 00000000000000000000000000000000:1770 333
L 0100007F:0016 444
L garbage
S 41 [111] 333]
C /opt/venv/bin/python -S /usr/local/bin/jupyter lab --ip=0.0.0.0 --port=8080\x1b[31m
S 42 222]
C tensorboard --logdir /runs
S x 444]
C sshd
"""


def test_the_listing_meets_sockets_and_processes() -> None:
    got = {x.port: x for x in parse_listing(LISTING)}
    assert set(got) == {8080, 8888, 6000}  # 22's owner line was malformed: not the container's
    assert got[8080].address == "127.0.0.1" and got[8080].pid == 41 and "\x1b" not in got[8080].command
    assert got[8888].address == "10.128.0.10" and got[8888].pid == 42
    assert got[6000].address == "::"


def test_what_a_port_probably_is() -> None:
    assert kind_of("/opt/venv/bin/python /usr/local/bin/jupyter-lab --no-browser") == "Jupyter"
    assert kind_of("python -m jupyter notebook") == "Jupyter"
    assert kind_of("tensorboard --logdir runs") == "TensorBoard"
    assert kind_of("python3 -m http.server 8000") == "HTTP server (python -m http.server)"
    assert kind_of("uvicorn app:api") == "HTTP server"
    assert kind_of("", "pytorchjob-port") == "PyTorch master (c10d)"
    assert kind_of("/usr/bin/redis-server *:6379") == "redis-server"
    rows = port_rows("master-0", "p", [(8888, "jupyter"), (7000, "")], parse_listing(LISTING))
    assert [(r.port, r.declared, r.listening) for r in rows] == [
        (6000, "", True), (7000, "-", False), (8080, "", True), (8888, "jupyter", True)]


def test_jupyters_token_for_its_port() -> None:
    text = ("Currently running servers:\nhttp://localhost:8889/?token=aaa :: /x\n"
            "http://hostname:8888/lab?token=0123abcd :: /workspace\n")
    assert jupyter_token(text, 8888) == "0123abcd"
    assert jupyter_token(text, 8889) == "aaa"
    assert jupyter_token(text, 9999) == ""
    assert jupyter_token("http://h:8888/?token=bad;rm :: /", 8888) == "bad"


def test_kubectl_port_arguments() -> None:
    assert [(p.local, p.remote) for p in parse_pairs(["8888", "18888:8888", ":6006", "0:22"])] == [
        (8888, 8888), (18888, 8888), (0, 6006), (0, 22)]
    for bad in ("88888", "x:80", "80:0", "-1", ""):
        with pytest.raises(ForwardError) as exc:
            parse_pairs([bad])
        assert exc.value.code == 2
    assert listen_addresses(["localhost"]) == ["127.0.0.1", "::1"]
    assert listen_addresses(["127.0.0.1,0.0.0.0"]) == ["127.0.0.1", "0.0.0.0"]
    with pytest.raises(ForwardError):
        listen_addresses(["example.com"])


def test_the_door_forwards_to_workloads_only() -> None:
    assert destination("pt-interactive") == Destination("pt-interactive")
    assert destination("pt-interactive.team-a") == Destination("pt-interactive", "team-a")
    assert destination("worker-1.pt.team-a") == Destination("pt", "team-a", "worker-1")
    for host in ("127.0.0.1", "::1", "[::1]", "localhost", "a.b.c.d", "Pt", "pt_x", "", "x" * 64, "10.0.0.1"):
        assert destination(host) is None, host


def test_over_the_door_the_line_to_paste() -> None:
    from sessions.ports import ssh_line

    assert ssh_line("master-0", "pt-interactive", "team-a", 8888) == \
        "ssh -N -L 8888:master-0.pt-interactive.team-a:8888 <this server>"
    assert ssh_line("worker-1", "pt", "team-a", 6006, "2222").endswith("-p 2222 <this server>")
    assert destination("master-0.pt-interactive.team-a") == Destination("pt-interactive", "team-a", "master-0")


def test_submit_with_ports_jupyter_and_tensorboard() -> None:
    from sessions.manifests import SubmitSpec, render, spec_problems

    spec = SubmitSpec(name="nb", framework="mpi", image="img", workers=2, namespace="ns", interactive=True,
                      ports=("7000:metrics", "6006"), jupyter=True, tensorboard="/runs/my logs")
    job = render(spec)
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert [(p["containerPort"], p.get("name")) for p in launcher["ports"]] == [
        (7000, "metrics"), (6006, "tensorboard"), (8888, "jupyter")]  # (6006 named for what runs there)
    script = launcher["command"][2]
    assert launcher["command"][:2] == ["/bin/sh", "-c"] and script.endswith("; exec sleep infinity")
    assert "command -v jupyter >/dev/null 2>&1 && { jupyter lab --ip=0.0.0.0 --port=8888" in script
    assert "tensorboard --logdir '/runs/my logs' --host 0.0.0.0 --port 6006" in script
    assert "ports" not in worker and "command" not in worker  # (the workers keep their sshd)
    plain = render(SubmitSpec(name="s", framework="pytorch", image="img", workers=1, namespace="ns", interactive=True))
    assert plain["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"] == [
        "sleep", "infinity"]

    def problems(**kw: object) -> list[str]:
        base: dict[str, object] = dict(name="s", framework="pytorch", image="img", workers=0, namespace="ns",
                                       interactive=True)
        return [p.message for p in spec_problems(SubmitSpec(**{**base, **kw}))]  # type: ignore[arg-type]

    assert problems(ports=("70000",)) == ['--port "70000": the port must be a number from 1 to 65535 (PORT or PORT:NAME)']
    assert "must be no more than 15 characters" in problems(ports=("80:a-very-long-port-name",))[0]
    assert "at least one letter" in problems(ports=("80:123",))[0]
    assert "given twice" in problems(ports=("80", "80:http"))[0]
    assert problems(interactive=False, command="x", jupyter=True) == [
        "--jupyter starts a server in an interactive session: add --interactive"]
    assert problems(tensorboard=" ") == ["--tensorboard LOGDIR: a log directory is required"]


def test_the_ports_view_says_the_kubelets_refusal_in_a_few_words_and_other_notes_as_they_are() -> None:
    from tui.screens.ports import short_note

    refusal = ("an error occurred forwarding 9999: error forwarding port 9999 to pod 9651, uid : failed to execute "
               "portforward in network namespace \"/var/run/netns/cni-9651\": failed to connect to localhost:9999 "
               "inside namespace \"9651\", IPv4: dial tcp4 127.0.0.1:9999: connect: connection refused")
    assert short_note(refusal, 9999) == "a connection was refused in the pod: nothing listens on 9999 there"
    replaced = "nb master-0: now pod nb-master-0 (the pod was replaced); forwarding to it"
    assert short_note(replaced, 8888) == replaced
    assert "\x1b" not in short_note("an error occurred forwarding 1: \x1b[2Jpod gone", 1)


def test_the_ports_view_names_the_forward_of_a_note_once() -> None:
    from sessions.ports import Forwarded
    from tui.screens.ports import said_of

    f = Forwarded(1, "nb", "team-a", "master-0", 8888, "Jupyter", 40000, "http://127.0.0.1:40000/", 0.0)
    replaced = said_of(f, "nb master-0: now pod nb-master-0 (the pod was replaced); forwarding to it")
    assert replaced.plain == "nb master-0:8888: now pod nb-master-0 (the pod was replaced); forwarding to it"
    token = said_of(f, "Jupyter's token changed with the new pod: http://127.0.0.1:40000/?token=ab")
    assert token.plain == "nb master-0:8888: Jupyter's token changed with the new pod: http://127.0.0.1:40000/?token=ab"
