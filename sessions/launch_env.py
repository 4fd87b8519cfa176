"""Secrets in a launch, kept out of the job's spec (issue #25, item 4); the environment a launch
relied on, carried into it.

A launch typed in a shell can hold secrets: inline `VAR=value` assignments of names like
`*TOKEN*`, `*KEY*`, `*SECRET*`, `*PASSWORD*`, `*CREDENTIAL*`, flags like `--password`, `--token`,
`--api-key`, `--*-key` and `--*-token`, and `export`s of such names earlier in its shell. A job's
spec is readable by anyone who may `get` it, so convert never puts them there unasked: with a
Secret's name (`--secret-env NAME`) each goes into that Secret and the job's env refers to it
(`valueFrom.secretKeyRef`; a flag's value becomes `"$VAR"`, which `sh -c` expands); with
`--allow-secrets` they stay as typed; without either, convert refuses. Nothing ranks prints shows
their values (`masked`).

The other `export`s of the launch's shell, before it, go into the job's env as they were; one
whose value the shell computed (`$(...)`, `$VAR`) cannot be, and is named with why, as is a
`source`d file (ranks cannot tell what it set).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from monitors.connection import ExitCode

from .cmdline import ASSIGNMENT, Token, launches_in, simple_commands
from .errors import SessionError

SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS")
# names that only say where a secret is, or what it is called
NOT_SECRET = re.compile(r"^(?:.*_)?(?:PATH|FILE|DIR|URL|ENDPOINT|ID|NAME|TYPE)$", re.I)
SECRET_FLAG = re.compile(r"--(?:[\w-]*[-_])?(?:password|passwd|token|secret|api[-_]key|key|credentials?)", re.I)
MASK = "***"


def is_secret_name(name: str) -> bool:
    """An environment variable whose value is a secret by its name (HF_TOKEN, WANDB_API_KEY), not
    one that only names where a secret is (KEY_FILE, TOKEN_PATH), nor a word that only contains one
    (TOKENIZERS_PARALLELISM)."""
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", name.upper()) if p]
    return any(p in SECRET_WORDS or p.endswith(("TOKEN", "APIKEY", "SECRET", "PASSWORD", "PASSWD")) for p in parts) \
        and not NOT_SECRET.match(name)


@dataclass(frozen=True)
class Secret:
    """A secret in a launch: the variable it is (or will be) in the job's env, its value, where it
    was ("HF_TOKEN=", "--password", "export HF_TOKEN"), and its place in the command (inline ones)."""

    var: str
    value: str
    where: str
    start: int = -1  # the span to take out of the command: the assignment word, or the flag's value
    end: int = -1
    flag: bool = False


def _flag_var(flag: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", flag.lstrip("-")).upper().strip("_") or "SECRET"


def in_command(command: str) -> list[Secret]:
    """The secrets written in a command line: its launches' inline assignments of secret names
    and their secret flags' values."""
    out: list[Secret] = []
    for launch in launches_in(command):
        words = launch.words
        for w in words[:launch.args_from]:
            if ASSIGNMENT.match(w.text):
                name, _, value = w.text.partition("=")
                if is_secret_name(name.rstrip("+")) and value:
                    out.append(Secret(name.rstrip("+"), value, f"{name}=", w.start, w.end))
        args = words[launch.args_from:]
        for i, w in enumerate(args):
            opt, eq, value = w.text.partition("=")
            if not SECRET_FLAG.fullmatch(opt):
                continue
            if eq and value:
                out.append(Secret(_flag_var(opt), value, opt, w.start + len(opt) + 1, w.end, flag=True))
            elif not eq and i + 1 < len(args) and not args[i + 1].text.startswith("-"):
                v = args[i + 1]
                out.append(Secret(_flag_var(opt), v.text, opt, v.start, v.end, flag=True))
    return out


def masked(text: str, values: list[str] | tuple[str, ...]) -> str:
    """`text` with every secret value shown as ***."""
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def mask_command(command: str) -> str:
    """A command line as ranks prints it: its secrets' values as ***."""
    return masked(command, [s.value for s in in_command(command)])


@dataclass(frozen=True)
class Exports:
    """What a shell exported before a launch: name -> value (None: computed by the shell, with
    why), and what it sourced."""

    values: tuple[tuple[str, str | None, str], ...] = ()  # (name, value or None, why not carried)
    sourced: tuple[str, ...] = ()


def _literal(t: Token) -> str | None:
    raw = t.text.partition("=")[2]
    if not t.single_quoted and ("$" in raw or "`" in raw):
        return None
    return raw


def track(line: str, shell: dict[str, tuple[str | None, bool, str]], sourced: list[str]) -> None:
    """The variables a command line sets in its shell: `shell` maps a name to (value or None when
    computed, exported, why not literal); `export`, `unset`, plain assignments and `source`."""
    for words in simple_commands(line):
        if not words:
            continue
        head = words[0].text
        if head in ("export", "declare", "typeset") and (head == "export" or any(w.text == "-x" for w in words)):
            for w in words[1:]:
                if w.text.startswith("-"):
                    continue
                if ASSIGNMENT.match(w.text):
                    name = w.text.split("=", 1)[0].rstrip("+")
                    value = _literal(w)
                    shell[name] = (value, True, "" if value is not None else f"its value is computed in the shell: "
                                                                         f"{w.text.partition('=')[2][:60]}")
                elif re.fullmatch(r"[A-Za-z_]\w*", w.text) and w.text in shell:
                    value, _, why = shell[w.text]
                    shell[w.text] = (value, True, why)
        elif head == "unset":
            for w in words[1:]:
                shell.pop(w.text, None)
        elif head in ("source", ".") and len(words) > 1:
            sourced.append(words[1].text)
        elif all(ASSIGNMENT.match(w.text) for w in words):
            for w in words:
                name = w.text.split("=", 1)[0].rstrip("+")
                value = _literal(w)
                exported = shell.get(name, (None, False, ""))[1]
                shell[name] = (value, exported, "" if value is not None else "its value is computed in the shell")


def exports_of(shell: dict[str, tuple[str | None, bool, str]], sourced: list[str]) -> Exports:
    return Exports(tuple((name, value, why) for name, (value, exported, why) in shell.items() if exported),
                   tuple(sourced))


# what the operators set on every pod: never carried over (the new job's own are right)
OPERATOR_VARS = re.compile(r"^(?:MASTER_ADDR|MASTER_PORT|WORLD_SIZE|RANK|LOCAL_RANK|NODE_RANK|PET_\w+|"
                           r"OMPI_\w+|PMI_\w+|PMIX_\w+|HOROVOD_\w+|TF_CONFIG|HOSTNAME|HOME|PWD|OLDPWD|SHLVL|"
                           r"RANKS_\w+|KUBERNETES_\w+|PATH)$")


@dataclass
class Prepared:
    """A launch made ready for a job's spec: the command, the env entries to add (secrets as
    references to `secret`), the Secret's data, and what to say."""

    command: str
    env: list[dict[str, object]] = field(default_factory=list)
    secret: str | None = None
    secret_data: dict[str, str] = field(default_factory=dict)
    secrets: list[Secret] = field(default_factory=list)
    carried: list[str] = field(default_factory=list)
    not_carried: list[str] = field(default_factory=list)

    @property
    def values(self) -> list[str]:
        return [s.value for s in self.secrets]

    def notes(self) -> list[str]:
        out = []
        if self.carried:
            out.append("carried into the job's env from the session's shell: " + ", ".join(self.carried))
        if self.not_carried:
            out.append("not carried into the job: " + "; ".join(self.not_carried))
        if self.secrets and self.secret:
            out.append(f"the launch's secrets ({', '.join(s.where for s in self.secrets)}) go into the Secret "
                       f"{self.secret}, which the job's env refers to; their values are shown nowhere")
        return out


def prepare(command: str, exports: Exports = Exports(), *, secret: str | None = None,
            allow: bool = False) -> Prepared:
    """The launch `command` and its shell's `exports` as a job runs them (see the module's doc).
    Secrets without `secret` or `allow` are a SessionError (exit 2) naming where they are."""
    found = in_command(command)
    out = Prepared(command)
    for name, value, why in exports.values:
        if OPERATOR_VARS.match(name):
            continue
        if value is None:
            out.not_carried.append(f"{name} ({why})")
        elif is_secret_name(name):
            found.append(Secret(name, value, f"export {name}"))
        else:
            out.env.append({"name": name, "value": value})
            out.carried.append(f"{name}={value}")
    for path in exports.sourced:
        out.not_carried.append(f"what `source {path}` set (ranks cannot tell)")
    out.secrets = found
    if not found:
        return out
    if allow:  # as typed (inline ones stay in the command; exported ones in the env, plainly)
        out.env += [{"name": s.var, "value": s.value} for s in found if s.where.startswith("export ")]
        out.carried += [f"{s.var}={MASK}" for s in found if s.where.startswith("export ")]
        return out
    if secret is None:
        raise SessionError(f"the launch holds secrets ({', '.join(s.where for s in found)}): a job's spec shows them to "
                           "anyone who may get it; --secret-env NAME puts them in a Secret the job's env refers to, "
                           "--allow-secrets keeps them in the spec", ExitCode.USAGE)
    out.secret = secret
    used: set[str] = set()
    edits: list[tuple[int, int, str]] = []
    for s in found:
        var = s.var
        n = 2
        while var in used:
            var, n = f"{s.var}_{n}", n + 1
        used.add(var)
        out.secret_data[var] = s.value
        out.env.append({"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": var}}})
        if s.start >= 0:
            edits.append((s.start, s.end, f'"${var}"' if s.flag else ""))
    text = command
    for start, end, new in sorted(edits, reverse=True):
        end += 1 if not new and end < len(text) and text[end] == " " else 0  # an assignment word and its space
        text = text[:start] + new + text[end:]
    out.command = text
    return out


def secret_manifest(name: str, namespace: str, data: dict[str, str], job: str) -> dict[str, object]:
    """The Secret holding a converted job's secrets (stringData: the server encodes it)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace, "labels": {"ranks/secrets-of": job}},
            "stringData": dict(data)}


def default_secret_name(job: str) -> str:
    return f"{job[:63 - 8].rstrip('-')}-secrets"

