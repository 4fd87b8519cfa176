"""Shell command lines as a launch sees them: words and operators with their place in the line
(enough of the POSIX shell grammar for what people type at a prompt: quotes, escapes, `$(...)`,
comments, `;` `&&` `||` `|` `&` newlines, redirections), the simple commands of a line, their
command word, and which distributed launcher, if any, a command runs.

Used by the shell history (`sessions.shell`: which recorded commands are launches) and by convert
(`sessions.convert`: rewriting a launch's arguments in place, the rest of the line untouched).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# the launchers `ranks convert --from-history` takes; python -m MODULE for these modules too
LAUNCHERS = ("horovodrun", "mpirun", "mpiexec", "torchrun", "deepspeed")
TORCH_MODULES = ("torch.distributed.run", "torch.distributed.launch")
MPI_LAUNCHERS = ("horovodrun", "mpirun", "mpiexec")
TORCH_LAUNCHERS = ("torchrun", "deepspeed", *(f"python -m {m}" for m in TORCH_MODULES))

# longest first: the lexer takes the first that matches
OPERATORS = ("&>>", "<<<", "<<-", "&&", "||", "|&", ";;", ">>", ">&", ">|", "<<", "<&", "<>", "&>",
             ";", "&", "|", "(", ")", ">", "<", "\n")
REDIRECTIONS = frozenset({"&>>", "<<<", "<<-", ">>", ">&", ">|", "<<", "<&", "<>", "&>", ">", "<"})
SEPARATORS = frozenset({"&&", "||", "|&", ";;", ";", "&", "|", "(", ")", "\n"})
RESERVED = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until"})
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
PYTHON = re.compile(r"python(?:3(?:\.\d+)?)?")
PYTHON_ARG_OPTIONS = frozenset({"-X", "-W", "--check-hash-based-pycs"})  # python options taking a value
ENV_ARG_OPTIONS = frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"})
BREAK = " \t\n;&|()<>"


@dataclass(frozen=True)
class Token:
    """A word (its text after quote removal, as far as a shell would know it without running
    anything) or an operator, at `start:end` of the line."""

    kind: str  # "word" or "op"
    text: str
    start: int
    end: int
    single_quoted: bool = False  # a part of the word is in single quotes (no expansion there)

    @property
    def is_word(self) -> bool:
        return self.kind == "word"


def _skip_subst(s: str, i: int, close: str) -> int:
    """From just after `$(` / `${` / a backtick to just after its closing character (nesting,
    quotes); the end of the line when it is not closed."""
    depth, n = 1, len(s)
    opening = {")": "(", "}": "{", "`": None}[close]
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "'" and close != "`":
            j = s.find("'", i + 1)
            i = n if j < 0 else j + 1
            continue
        if c == '"' and close != "`":
            i = _skip_double(s, i + 1)
            continue
        if opening is not None and c == opening:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def _skip_double(s: str, i: int) -> int:
    """From just after an opening `"` to just after the closing one."""
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        if c == "$" and i + 1 < n and s[i + 1] in "({":
            i = _skip_subst(s, i + 2, ")" if s[i + 1] == "(" else "}")
            continue
        if c == "`":
            i = _skip_subst(s, i + 1, "`")
            continue
        i += 1
    return n


def tokens(line: str) -> list[Token]:
    """The words and operators of a command line; comments are dropped, a backslash-newline joins
    lines. Unclosed quotes run to the end of the line (as far as it goes)."""
    out: list[Token] = []
    s, n, i = line, len(line), 0
    while i < n:
        c = s[i]
        if c in " \t\r":
            i += 1
            continue
        if c == "\\" and i + 1 < n and s[i + 1] == "\n":
            i += 2
            continue
        if c == "#":  # a comment: only where a word would start
            j = s.find("\n", i)
            i = n if j < 0 else j
            continue
        op = next((o for o in OPERATORS if s.startswith(o, i)), None)
        if op is not None:
            out.append(Token("op", op, i, i + len(op)))
            i += len(op)
            continue
        start, text, single = i, [], False
        while i < n and s[i] not in BREAK:
            c = s[i]
            if c == "\\":
                if i + 1 < n and s[i + 1] == "\n":
                    i += 2
                    continue
                text.append(s[i + 1:i + 2])
                i += 2
            elif c == "'":
                j = s.find("'", i + 1)
                j = n if j < 0 else j
                text.append(s[i + 1:j])
                single = True
                i = j + 1
            elif c == '"':
                j = _skip_double(s, i + 1)
                inner = s[i + 1:j - 1] if j - 1 > i and s[j - 1] == '"' else s[i + 1:j]
                text.append(re.sub(r'\\([\\"$`\n])', r"\1", inner))
                i = j
            elif c == "$" and i + 1 < n and s[i + 1] in "({":
                j = _skip_subst(s, i + 2, ")" if s[i + 1] == "(" else "}")
                text.append(s[i:j])
                i = j
            elif c == "`":
                j = _skip_subst(s, i + 1, "`")
                text.append(s[i:j])
                i = j
            else:
                text.append(c)
                i += 1
        out.append(Token("word", "".join(text), start, min(i, n), single))
    return out


def simple_commands(line: str) -> list[list[Token]]:
    """The line's simple commands (split at `;`, `&&`, `||`, `|`, `&`, parentheses and newlines),
    each its words without redirections (`> log`, `2>&1`); a function's name where it is defined
    is none."""
    out: list[list[Token]] = [[]]
    toks = tokens(line)
    skip_next = False
    for k, t in enumerate(toks):
        if t.kind == "op":
            if t.text == "(" and len(out[-1]) == 1 and k + 1 < len(toks) and toks[k + 1].text == ")":
                out[-1] = []  # `name() { ...; }` defines a function: `name` runs nothing here
            if t.text in SEPARATORS:
                out.append([])
            elif t.text in REDIRECTIONS:
                skip_next = True
                prev = out[-1][-1] if out[-1] else None
                if prev is not None and prev.text.isdigit() and prev.end == t.start:
                    out[-1].pop()  # the descriptor of `2>`
            continue
        if skip_next:
            skip_next = False
            continue
        out[-1].append(t)
    return [words for words in out if words]


def command_word(words: list[Token]) -> int | None:
    """Where the command word is: after reserved words (`if`, `do`, `!`...), `time [-p]`, leading
    `VAR=value` assignments, and the wrappers `env [options] [VAR=value]...` and `nohup`. None
    when there is none (only assignments)."""
    i, n = 0, len(words)
    while i < n:
        w = words[i]
        if w.text in RESERVED or w.text == "nohup" or ASSIGNMENT.match(w.text):
            i += 1
        elif w.text == "time":
            i += 1
            while i < n and words[i].text in ("-p", "--"):
                i += 1
        elif w.text == "env" or w.text.endswith("/env"):
            i += 1
            while i < n and (words[i].text.startswith("-") or ASSIGNMENT.match(words[i].text)):
                opt = words[i].text
                i += 1
                if opt == "--":
                    continue
                if opt in ENV_ARG_OPTIONS:
                    i += 1
        else:
            return i
    return None


def launcher_of(words: list[Token]) -> tuple[str, int] | None:
    """The launcher a simple command runs ("torchrun", "python -m torch.distributed.run"...) and
    where its arguments start; None when it runs something else."""
    at = command_word(words)
    if at is None:
        return None
    name = words[at].text.rsplit("/", 1)[-1]
    if name in LAUNCHERS:
        return name, at + 1
    if PYTHON.fullmatch(name):
        i = at + 1
        while i < len(words):
            arg = words[i].text
            if arg == "-m" and i + 1 < len(words):
                module, i = words[i + 1].text, i + 2
            elif arg.startswith("-m") and len(arg) > 2:
                module, i = arg[2:], i + 1
            elif arg in PYTHON_ARG_OPTIONS:
                i += 2
                continue
            elif arg.startswith("-") and arg != "-":
                i += 1
                continue
            else:
                return None  # a script (or -c): not a launcher
            return (f"python -m {module}", i) if module in TORCH_MODULES else None
    return None


@dataclass(frozen=True)
class LaunchIn:
    """A launcher found in a command line: which, and its simple command's words."""

    launcher: str
    words: list[Token]
    args_from: int


def launches_in(line: str) -> list[LaunchIn]:
    out = []
    for words in simple_commands(line):
        found = launcher_of(words)
        if found is not None:
            out.append(LaunchIn(found[0], words, found[1]))
    return out


def launcher_in(line: str) -> str | None:
    """The first launcher a command line runs (`cd /w && torchrun ...` runs torchrun), or None."""
    found = launches_in(line)
    return found[0].launcher if found else None
