"""One quoting function per shell (cudamatrix.safe.shells), judged by the shells themselves: each line this
module makes is run by the real bash, sh (dash here), zsh and fish, which must read back exactly the value it was
given and run nothing from it; and no line holds a raw control character (printed, it does nothing to a terminal).
PowerShell is not installed here: its words are read back by the rules of its tokenizer (a single-quoted string
ends at a quote that no second quote follows, and a pair of quotes is the second one; the typographic quotes
U+2018-U+201B are quotes too: about_Quoting_Rules) and its binder (a ``[char]`` on the left of ``+`` becomes a
one-character string, so the sum is the concatenation); tests/e2e/test_hardening.py sources them in a real pwsh
where one is installed. Each shell runs once per test, all values in one script."""
from __future__ import annotations

import copy
import json
import os
import pickle
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from cudamatrix.cli.doctor_cmd import aim_findings
from cudamatrix.diagnose.loads import fix_for
from cudamatrix.ldso.libpaths import WrongLoad
from cudamatrix.models import Finding, LibraryLoad
from cudamatrix.safe.shells import (
    ALIASES,
    SHELLS,
    Command,
    Said,
    aim,
    export_line,
    joined,
    known_shell,
    pip,
    quote,
    tool,
)
from cudamatrix.safe.text import CONTROLS

# folder lists a hostile or broken file system can hold: quotes, expansions, newlines, control characters
VALUES = [
    "/usr/lib/x86_64-linux-gnu:/usr/local/cuda-12.4/lib64", "/srv/it's here/lib", "/srv/$(touch X)/`touch X`/lib",
    "/srv/a\\'\"; touch X; #/lib", "/srv/new\nline; touch X", "/srv/lib\n", "\n", "/srv/back\\slash\\",
    "/srv/\u00fcn\u00efc\u00f6d\u00e9 \u2603", "/srv/\u2018typographic\u2019 \u201aquotes\u201b", "$HOME", "~", "*",
    "brace{a,b}*?[x]", "-n", "%self", "a#b", "(x)", "a;b",
    # control characters: each shell's escapes, never raw
    "\x1b[2J\x1b]8;;https://evil.example/\x07x", "cr\rline", "bidi\u202egnp.exe", "c1\x85\x9b'$(touch X)",
    "\x01'\x7f\\", "a\n\x1b", "a\\\x1b", "\x1b\\", "\x1b'", "\x1b\x1b", "\u00fc\x1b\u2603\u2066",
    "\x1bit's a\\b\u2019\x1b\x85", "\ttab\x1b", "\x1b\n",
]
RUN = {"bash": ["bash", "--noprofile", "--norc"], "sh": ["sh"], "dash": ["dash"], "zsh": ["zsh", "-f"],
       "fish": ["fish", "--no-config"]}


def _run(shell: str, lines: list[str], folder: Path) -> None:
    """``lines`` run by the real ``shell`` in ``folder``, as a script; skipped where it is not installed."""
    if shutil.which(RUN[shell][0]) is None:
        pytest.skip(f"{shell} is not installed here (.ci/run installs fish and zsh)")
    script = folder / "lines"
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = subprocess.run([*RUN[shell], str(script)], cwd=folder, capture_output=True, timeout=60,
                         env={**os.environ, "LC_ALL": "C.UTF-8"})
    assert run.returncode == 0, (shell, run.stderr.decode("utf-8", "replace"))
    assert not (folder / "X").exists(), shell  # nothing of a value ran


def _shell_of(shell: str) -> str:
    return "sh" if shell == "dash" else shell


@pytest.mark.parametrize("shell", ["bash", "sh", "dash", "zsh", "fish"])
def test_each_shell_reads_every_exported_value_back_exactly(tmp_path, shell):
    lines = []
    for i, value in enumerate(VALUES):
        line = export_line(_shell_of(shell), f"CM_{i}", value)
        assert not CONTROLS.search(line), (shell, line)
        lines.append(line)
    _run(shell, [*lines, "env -0 > out"], tmp_path)  # a child's environment: every variable is exported
    seen = dict(e.split("=", 1) for e in (tmp_path / "out").read_bytes().decode("utf-8").split("\0") if "=" in e)
    assert [seen.get(f"CM_{i}") for i in range(len(VALUES))] == VALUES


@pytest.mark.parametrize("shell", ["bash", "sh", "dash", "zsh", "fish"])
def test_each_shell_reads_every_quoted_word_back_as_one_argument(tmp_path, shell):
    lines = [f"printf '%s' {quote(_shell_of(shell), value)} > out{i}" for i, value in enumerate(VALUES)]
    _run(shell, lines, tmp_path)
    assert [(tmp_path / f"out{i}").read_bytes().decode("utf-8") for i in range(len(VALUES))] == VALUES


@pytest.mark.parametrize("shell", ["bash", "sh", "dash", "zsh", "fish"])
def test_an_empty_value_removes_the_variable(tmp_path, shell):
    if shell == "fish":
        lines = ["set -gx CM_VALUE old", export_line("fish", "CM_VALUE", ""),
                 "if set -q CM_VALUE; printf 'set'; else; printf 'unset'; end > out"]
    else:
        lines = ["CM_VALUE=old; export CM_VALUE", export_line(_shell_of(shell), "CM_VALUE", ""),
                 "printf '%s' \"${CM_VALUE-unset}\" > out"]
    lines.append("printenv CM_VALUE >> out || true")  # and no child sees it
    _run(shell, lines, tmp_path)
    assert (tmp_path / "out").read_text() == "unset"


def test_the_empty_value_lines_are_each_shell_s_own():
    assert [export_line(s, "LD_LIBRARY_PATH", "") for s in ("bash", "zsh", "sh", "fish", "powershell", "pwsh")] == [
        "unset LD_LIBRARY_PATH", "unset LD_LIBRARY_PATH", "unset LD_LIBRARY_PATH", "set -e LD_LIBRARY_PATH",
        "Remove-Item Env:LD_LIBRARY_PATH -ErrorAction SilentlyContinue",
        "Remove-Item Env:LD_LIBRARY_PATH -ErrorAction SilentlyContinue"]


# --- PowerShell, read by its tokenizer's and binder's rules ----------------------------------------------------

PS_QUOTES = "'\u2018\u2019\u201a\u201b"


def _ps_string(word: str, i: int) -> tuple[str, int]:
    """The single-quoted string that starts at ``word[i]`` and the index after it."""
    assert word[i] in PS_QUOTES, (word, i)
    out, i = [], i + 1
    while True:
        assert i < len(word), f"unterminated string: {word!r}"
        c = word[i]
        if c in PS_QUOTES:
            if i + 1 < len(word) and word[i + 1] in PS_QUOTES:  # two in a row: the second one, kept
                out.append(word[i + 1])
                i += 2
                continue
            return "".join(out), i + 1
        out.append(c)
        i += 1


def _powershell_reads(word: str) -> str:
    """The string PowerShell makes of ``word``: one single-quoted string, or ``( part + part ... )`` of such
    strings and ``[char]0xHHHH`` (a char on the left of + is a one-character string: the sum concatenates)."""
    if word[0] != "(":
        value, end = _ps_string(word, 0)
        assert end == len(word), word
        return value
    assert word.endswith(")"), word
    out, i, body = [], 0, word[1:-1]
    while True:
        if body.startswith("[char]0x", i):
            assert body[i + 8:i + 12].isalnum() and len(body[i + 8:i + 12]) == 4, body
            out.append(chr(int(body[i + 8:i + 12], 16)))
            i += 12
        else:
            value, i = _ps_string(body, i)
            out.append(value)
        if i == len(body):
            return "".join(out)
        assert body.startswith(" + ", i), body
        i += 3


def test_powershell_reads_every_value_back_exactly():
    for value in VALUES:
        line = export_line("powershell", "LD_LIBRARY_PATH", value)
        assert not CONTROLS.search(line), line
        assert line.startswith("$env:LD_LIBRARY_PATH = ")
        assert _powershell_reads(line[len("$env:LD_LIBRARY_PATH = "):]) == value, (value, line)
        assert export_line("pwsh", "LD_LIBRARY_PATH", value) == line


def test_powershell_doubles_every_quote_it_reads_as_one():
    assert quote("powershell", "it's") == "'it''s'"
    assert quote("powershell", "\u2018a\u2019 \u201ab\u201b") == "'\u2018\u2018a\u2019\u2019 \u201a\u201ab\u201b\u201b'"
    assert quote("powershell", "$HOME `n \"x\"") == "'$HOME `n \"x\"'"  # nothing else is special in '...'
    assert quote("powershell", "") == "''"


# --- the printed words: what a user copies ----------------------------------------------------------------------

def test_a_value_with_control_characters_is_printed_as_each_shell_s_escapes():
    value = "\x1bit's a\\b\u2019\x1b\x85"  # a control first and last, two in a row, a quote and a backslash
    assert quote("bash", value) == quote("zsh", value) == "$'\\x1bit\\'s a\\\\b\u2019\\x1b\\xc2\\x85'"
    assert quote("sh", value) == ("\"$(printf '\\033')\"'it'\"'\"'s a\\b\u2019'\"$(printf '\\033')\""
                                  "\"$(printf '\\302\\205')\"")
    assert quote("fish", value) == "\\x1b'it\\'s a\\\\b\u2019'\\x1b\\xc2\\x85"
    assert quote("powershell", value) == "([char]0x001b + 'it''s a\\b\u2019\u2019' + [char]0x001b + [char]0x0085)"
    assert quote("bash", "\u202e") == "$'\\xe2\\x80\\xae'"
    assert quote("sh", "\u202e") == "\"$(printf '\\342\\200\\256')\""
    assert quote("powershell", "\u202e") == "([char]0x202e)"


def test_a_value_without_control_characters_is_printed_in_each_shell_s_plain_quotes():
    value = "/srv/it's \u2018x\u2019 $HOME\\"
    assert quote("bash", value) == quote("zsh", value) == quote("sh", value) == shlex.quote(value)
    assert quote("fish", value) == "'/srv/it\\'s \u2018x\u2019 $HOME\\\\'"
    assert quote("powershell", value) == "'/srv/it''s \u2018\u2018x\u2019\u2019 $HOME\\'"
    assert quote("sh", "/usr/lib/x86_64-linux-gnu") == "/usr/lib/x86_64-linux-gnu"


def test_fish_prints_a_word_without_anything_to_expand_as_it_is():
    for word in ("/usr/lib/x86_64-linux-gnu:/usr/local/cuda-12.4/lib64", "a+b=c,d.e_f", "-", "0"):
        assert quote("fish", word) == word
    for word in ("a b", "$HOME", "~", "*", "a;b", "(x)", "{a,b}", "%self", "a#b", "", "/srv/lib\n", "\n", "a\tb"):
        assert quote("fish", word).startswith("'"), word


def test_the_exported_line_names_its_variable_in_each_shell():
    assert export_line("bash", "LD_LIBRARY_PATH", "/a b") == "export LD_LIBRARY_PATH='/a b'"
    assert export_line("zsh", "_X1", "/a") == "export _X1=/a"
    assert export_line("sh", "K", "\x1b") == "export K=\"$(printf '\\033')\""
    assert export_line("fish", "K", "/a b") == "set -gx K '/a b'"
    assert export_line("powershell", "K", "/a") == "$env:K = '/a'"


# --- names this module does not know ----------------------------------------------------------------------------

def test_pwsh_is_powershell_and_unknown_shells_are_none():
    assert ALIASES == {"pwsh": "powershell"}
    assert [known_shell(s) for s in SHELLS] == list(SHELLS)
    assert known_shell("pwsh") == "powershell"
    for unknown in ("tcsh", "csh", "cmd", "Bash", "", "powershell.exe"):
        assert known_shell(unknown) is None
    assert quote("pwsh", "it's\x1b") == quote("powershell", "it's\x1b")


@pytest.mark.parametrize("value", ["/a", "\x1b", ""])
def test_an_unknown_shell_is_refused_with_its_name(value):
    with pytest.raises(ValueError, match=r"^no quoting known for shell 'tcsh'$"):
        export_line("tcsh", "K", value)
    if value:
        with pytest.raises(ValueError, match=r"^no quoting known for shell 'tcsh'$"):
            quote("tcsh", value)


@pytest.mark.parametrize("key", ["1A", "A-B", "A B", "", "A=B", "K\n", "\u00e9", "A;touch X"])
def test_a_name_that_is_no_variable_name_is_refused(key):
    for shell in SHELLS:
        with pytest.raises(ValueError) as caught:
            export_line(shell, key, "/a")
        assert str(caught.value) == f"not a variable name: {key!r}"


# --- commands pointed at an interpreter --------------------------------------------------------------------------
# (issue #41: commands are records, Command, in words that carry them, Said; rendered once, quoted for the shell;
# no regular expression goes over the finished words any more)

def test_aimed_commands_name_the_interpreter_as_one_shell_word():
    python = "/v/it's here/bin/python"
    q = shlex.quote(python)
    said = Said("run ", tool("fix"), ", then ", tool("verify"))
    assert said == "run cudamatrix fix, then cudamatrix verify"  # the words for no interpreter in particular
    assert said.aimed(python) == f"run cudamatrix fix --python {q}, then cudamatrix verify --python {q}"
    for verb in ("detect", "doctor", "solve", "fix", "verify", "env"):
        assert Said(tool(verb)).aimed(python) == f"cudamatrix {verb} --python {q}"
    assert Said(tool("fix", "--undo")).aimed(python) == f"cudamatrix fix --python {q} --undo"
    both = Said(pip("install", "torch==2.5.1"), " && ", pip("uninstall", "-y", "jax"))
    assert both.aimed(python) == f"{q} -m pip install torch==2.5.1 && {q} -m pip uninstall -y jax"
    assert shlex.split(Said(pip("install", "x")).aimed(python)) == [python, "-m", "pip", "install", "x"]


def test_a_command_that_names_its_interpreter_or_is_not_aimed_stays_as_it_is():
    python = "/v/bin/python"
    assert tool("fix", "--resume", "--python", "/a").line(python) == "cudamatrix fix --resume --python /a"
    assert Command(("uv", "pip", "install", "x")).line(python) == "uv pip install x"
    assert Said(tool("fix"), " and ", pip("install", "x")).aimed(None) == "cudamatrix fix and pip install x"


def test_each_word_is_quoted_once_for_the_shell():
    """A requirement with a range or extras is one word (before, a finding's concrete fix joined them bare: ``>``
    redirected the shell); a word written in quotes always keeps a quote it holds as a shell quote."""
    assert pip("install", "einops>=0.7", "jax[cuda12]==0.4.30").line() == "pip install 'einops>=0.7' 'jax[cuda12]==0.4.30'"
    assert pip("install", "torch==2.5.1+cu121").line() == "pip install torch==2.5.1+cu121"
    assert pip("install", "a==1", always_quoted=(1,)).line() == "pip install 'a==1'"
    odd = pip("install", "it's", always_quoted=(1,)).line()
    assert shlex.split(odd) == ["pip", "install", "it's"]


def test_words_that_look_like_commands_are_not_rewritten():
    """Only the command records are aimed. Before, a regular expression rewrote whatever looked like a command in
    the finished words: a folder named "x pip install y" in LD_LIBRARY_PATH came out as "x /v/python -m pip
    install y", and a command followed by a path holding "--python" was not aimed at all."""
    python = "/v/bin/python"
    folder = "/srv/libs pip install 2/lib"
    fix = fix_for(WrongLoad(LibraryLoad(framework="torch", soname="libcudnn.so.9", path=f"{folder}/libcudnn.so.9",
                                        rule="LD_LIBRARY_PATH"), "LD_LIBRARY_PATH", "9.0.0", "9.1.0"))
    [finding] = aim_findings([Finding("LIBRARY_SHADOWED", "error", "t", fix=fix)], python)
    assert finding.fix == f"remove {folder} from LD_LIBRARY_PATH (cudamatrix env --python {python} prints the export)"
    flagged = Said(tool("env"), " prints the export for /srv/my--python-env/lib")
    assert flagged.aimed(python) == f"cudamatrix env --python {python} prints the export for /srv/my--python-env/lib"
    assert aim("see pip install x; cudamatrix fix", python) == "see pip install x; cudamatrix fix"  # plain words


def test_said_keeps_its_commands_through_joins_copies_and_json():
    said = joined("; or ", [Said("upgrade the driver"), Said("install it: ", pip("install", "x"))])
    assert said == "upgrade the driver; or install it: pip install x"
    assert Said("still present after: ", said).aimed("/p") == \
        "still present after: upgrade the driver; or install it: /p -m pip install x"
    assert pickle.loads(pickle.dumps(said)).aimed("/p") == said.aimed("/p")
    assert copy.deepcopy(said).aimed("/p") == said.aimed("/p")
    assert json.dumps({"fix": said}) == json.dumps({"fix": str(said)})


def test_aim_without_an_interpreter_changes_nothing():
    said = Said(pip("install", "x"), "; ", tool("fix"))
    assert aim(said, None) == "pip install x; cudamatrix fix" and aim(said, "") == "pip install x; cudamatrix fix"
