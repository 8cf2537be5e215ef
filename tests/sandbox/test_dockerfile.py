"""Dockerfile parsing and instruction semantics (pure: no sandbox, no file system)."""

from __future__ import annotations

import pytest

from sandbox.stages import Config, Copy, Run, resolve
from tasks.dockerfile import DockerfileError, ExpansionError, expand, expand_words, parse


def steps(text: str, **kw: object) -> list:
    return resolve(text, **kw)[-1].steps  # type: ignore[arg-type]


def last_config(text: str):
    return [s for s in steps(text) if isinstance(s, Config)][-1].config


# -- lexical ---------------------------------------------------------------------------------
def test_comments_continuations_and_blank_lines_inside_an_instruction() -> None:
    df = parse("FROM x\n# a comment\nRUN echo a \\\n  # inside\n\n  && echo b\n")
    assert [i.keyword for i in df.instructions] == ["FROM", "RUN"]
    assert df.instructions[1].args == "echo a   && echo b"
    assert df.instructions[1].line == 3


def test_escape_directive_switches_the_continuation_character() -> None:
    df = parse("# escape=`\nFROM x\nRUN dir c:\\ `\n  && echo ok\n")
    assert df.escape == "`"
    assert df.instructions[1].args == "dir c:\\   && echo ok"


def test_directive_after_an_instruction_is_a_comment() -> None:
    df = parse("FROM x\n# escape=`\nRUN a \\\n b\n")
    assert df.escape == "\\" and df.instructions[1].args == "a  b"


def test_keywords_are_case_insensitive_and_unknown_ones_name_the_line() -> None:
    assert parse("from x\nrun true\n").instructions[1].keyword == "RUN"
    with pytest.raises(DockerfileError) as e:
        parse("FROM x\n\nRUNN true\n", path="env/Dockerfile")
    assert (e.value.path, e.value.line, e.value.instruction) == ("env/Dockerfile", 3, "RUNN")
    assert str(e.value).startswith("env/Dockerfile:3: RUNN: unknown instruction")


def test_json_exec_form_and_fallback_to_shell_form() -> None:
    df = parse('FROM x\nRUN ["echo", "a b"]\nRUN [not json\nCMD ["a", 1]\n')
    assert df.instructions[1].exec_form == ("echo", "a b")
    assert df.instructions[2].exec_form is None
    assert df.instructions[3].exec_form is None  # a non-string element: shell form


def test_flags_are_split_from_arguments() -> None:
    ins = parse("FROM x\nCOPY --chown=1:2 --chmod=0755 a /b\n").instructions[1]
    assert ins.flags == {"chown": "1:2", "chmod": "0755"} and ins.args == "a /b"


def test_heredoc_bodies_quoted_and_unquoted_and_tab_stripping() -> None:
    text = "FROM x\nRUN cat > /f << 'EOF'\n$HOME\nEOF\nRUN <<-END\n\techo hi\n\tEND\nRUN true\n"
    ins = parse(text).instructions
    assert ins[1].heredocs[0].body == "$HOME\n" and not ins[1].heredocs[0].expand
    assert ins[2].heredocs[0].body == "echo hi\n" and ins[2].heredocs[0].expand
    assert ins[3].keyword == "RUN" and ins[3].line == 8


def test_unterminated_heredoc_is_an_error() -> None:
    with pytest.raises(DockerfileError, match="never terminated"):
        parse("FROM x\nRUN cat <<EOF\nabc\n")


def test_here_string_is_not_a_heredoc() -> None:
    assert parse("FROM x\nRUN cat <<<EOF\n").instructions[1].heredocs == ()


# -- expansion ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("$A", "1"),
        ("${A}x", "1x"),
        ("${U:-d}", "d"),
        ("${E:-d}", "d"),
        ("${E-d}", ""),
        ("${A:+set}", "set"),
        ("${U:+set}", ""),
        ("'$A'", "$A"),
        ('"$A b"', "1 b"),
        ("\\$A", "$A"),
        ('"\\$A"', "$A"),
        ("${U:-${A}}", "1"),
        ("a$", "a$"),
    ],
)
def test_expand(word: str, expected: str) -> None:
    assert expand(word, {"A": "1", "E": ""}) == expected


def test_expand_words_splits_on_unquoted_whitespace_only() -> None:
    assert expand_words('a "b c" $X\td', {"X": "x y"}) == ["a", "b c", "x y", "d"]


def test_required_variable_unset_raises() -> None:
    with pytest.raises(ExpansionError, match="need it"):
        expand("${U:?need it}", {})


# -- instruction semantics -------------------------------------------------------------------
def test_run_shell_form_uses_the_shell_and_exec_form_is_verbatim() -> None:
    s = steps('FROM x\nRUN echo $HOME\nSHELL ["/bin/bash", "-o", "pipefail", "-c"]\nRUN a\n'
              'RUN ["/bin/echo", "$HOME"]\n')  # fmt: skip
    runs = [x for x in s if isinstance(x, Run)]
    assert runs[0].argv == ("/bin/sh", "-c", "echo $HOME")  # not substituted by the builder
    assert runs[1].argv == ("/bin/bash", "-o", "pipefail", "-c", "a")
    assert runs[2].argv == ("/bin/echo", "$HOME")


def test_run_with_heredocs_runs_the_whole_text() -> None:
    s = steps("FROM x\nRUN cat > /f <<'EOF'\nline $X\nEOF\nRUN <<EOF\necho one\necho two\nEOF\n")
    runs = [x for x in s if isinstance(x, Run)]
    assert runs[0].argv[-1] == "cat > /f <<'EOF'\nline $X\nEOF"
    assert runs[1].argv[-1] == "echo one\necho two\n"


def test_env_both_forms_and_substitution_order() -> None:
    cfg = last_config('FROM x\nENV A=1 B="two words" C=${A}x\nENV D old style $A\nENV A=2 E=$A\n')
    assert cfg.env["A"] == "2" and cfg.env["B"] == "two words" and cfg.env["C"] == "x"
    assert cfg.env["D"] == "old style 1"
    # Docker substitutes a whole ENV line with the env as it was before the line.
    assert cfg.env["E"] == "1"
    assert cfg.env["PATH"].startswith("/usr/local/sbin")


def test_arg_global_default_override_and_scope() -> None:
    text = (
        "ARG V=1\nARG BASE=debian:${V}\nFROM $BASE\nRUN echo a\nARG V\nARG W=w${V}\n"
        "ENV W=env\nRUN echo b\n"
    )
    stages = resolve(text)
    assert stages[-1].base == "debian:1"
    runs = [x for x in stages[-1].steps if isinstance(x, Run)]
    assert "V" not in dict(runs[0].env)  # a global ARG is invisible until re-declared
    env = dict(runs[1].env)
    assert env["V"] == "1" and env["W"] == "env"  # ENV overrides an ARG of the same name
    assert resolve(text, build_args={"V": "9"})[-1].base == "debian:9"


def test_arg_values_never_reach_the_image_config() -> None:
    assert "X" not in last_config("FROM x\nARG X=1\nENV Y=$X\n").env


def test_workdir_is_relative_to_the_previous_one_and_substituted() -> None:
    cfg = last_config("FROM x\nENV D=/srv\nWORKDIR $D\nWORKDIR a/b\nWORKDIR ../c\n")
    assert cfg.workdir == "/srv/a/c"


def test_user_shell_cmd_entrypoint_are_recorded() -> None:
    cfg = last_config('FROM x\nUSER app:app\nCMD ["run"]\nENTRYPOINT /bin/start -x\n')
    assert cfg.user == "app:app"
    assert cfg.entrypoint == ("/bin/sh", "-c", "/bin/start -x") and cfg.cmd is None
    assert last_config("FROM x\nCMD echo hi\n").cmd == ("/bin/sh", "-c", "echo hi")


def test_copy_destinations_sources_and_flags() -> None:
    s = steps(
        "FROM x\nWORKDIR /w\nCOPY a b sub/\nCOPY --chown=app:app --chmod=0640 f .\n"
        'COPY ["with space", "/abs"]\nADD data.tar.gz /opt/\n'
    )
    copies = [x for x in s if isinstance(x, Copy)]
    assert copies[0].sources == ("a", "b") and copies[0].dest == "/w/sub/"
    assert copies[1].dest == "/w/" and copies[1].chown == "app:app" and copies[1].chmod == 0o640
    assert copies[2].sources == ("with space",) and copies[2].dest == "/abs"
    assert copies[3].add and copies[3].dest == "/opt/"


def test_copy_several_sources_need_a_directory_destination() -> None:
    with pytest.raises(DockerfileError, match="must end in '/'"):
        resolve("FROM x\nCOPY a b /dest\n")


def test_copy_heredoc_creates_files() -> None:
    s = steps("FROM x\nENV N=7\nCOPY <<EOF /etc/n.conf\nn=$N\nEOF\n")
    assert s[-1].inline == (("EOF", "n=7\n"),) and s[-1].dest == "/etc/n.conf"


def test_add_url_and_context_escape_are_clear_errors() -> None:
    with pytest.raises(DockerfileError, match=r"Dockerfile:2: ADD: ADD of a URL"):
        resolve("FROM x\nADD https://example.org/x.tgz /x\n")
    with pytest.raises(DockerfileError, match="outside the build context"):
        resolve("FROM x\nCOPY ../secret /x\n")


def test_multi_stage_copy_from_and_unused_stages_dropped() -> None:
    text = (
        "FROM a AS build\nRUN make\nFROM b AS unused\nRUN x\n"
        "FROM c\nCOPY --from=build /out /app/\nFROM build AS again\n"
    )
    stages = resolve(text)
    assert [s.name for s in stages] == ["build", "again"]  # the last stage builds on `build`
    stages = resolve(text.rsplit("FROM build", 1)[0])
    assert [s.index for s in stages] == [0, 2]
    assert stages[-1].steps[0].from_stage == 0
    with pytest.raises(DockerfileError, match="--from=nope"):
        resolve("FROM a\nCOPY --from=nope /x /y\n")


def test_metadata_instructions_are_accepted_and_ignored() -> None:
    s = steps(
        'FROM x\nLABEL a=b\nEXPOSE 80\nVOLUME ["/data"]\nSTOPSIGNAL SIGTERM\n'
        "HEALTHCHECK CMD true\nMAINTAINER me\nONBUILD RUN x\n"
    )
    assert s == []


def test_instruction_before_from_and_no_from() -> None:
    with pytest.raises(DockerfileError, match="before the first FROM"):
        resolve("RUN true\nFROM x\n")
    with pytest.raises(DockerfileError, match="no FROM"):
        resolve("ARG A=1\n")


def test_run_mount_is_an_unsupported_flag_naming_the_line() -> None:
    with pytest.raises(DockerfileError, match=r":2: RUN: unsupported flag --mount"):
        resolve("FROM x\nRUN --mount=type=cache,target=/c true\n")


def test_every_corpus_style_dockerfile_resolves() -> None:
    text = (
        "FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624\n\n"
        "ENV DEBIAN_FRONTEND=noninteractive\n"
        "RUN apt-get update && \\\n    apt-get install -y python3-pip && \\\n"
        "    rm -rf /var/lib/apt/lists/*\n"
        "COPY data/ /workspace/data/\nWORKDIR /workspace\nENV TEST_DIR=/tests\n"
    )
    stages = resolve(text)
    assert stages[0].base == "ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624"
    kinds = [type(s).__name__ for s in stages[0].steps]
    assert kinds == ["Config", "Run", "Copy", "Config", "Config"]
    assert stages[0].steps[-1].config.workdir == "/workspace"
    assert dict(stages[0].steps[1].env)["DEBIAN_FRONTEND"] == "noninteractive"


def test_final_workdir_static_reading() -> None:
    from tasks.dockerfile import final_workdir

    assert final_workdir("FROM x\nWORKDIR /a\nENV D=b\nWORKDIR $D\n") == "/a/b"
    assert final_workdir("FROM x\nRUN true\n") is None
    assert final_workdir("FROM x AS b\nWORKDIR /src\nFROM b\nWORKDIR out\n") == "/src/out"
    assert final_workdir("FROM x\nWORKDIR /a\nFROM y\n") is None
    assert final_workdir("FROM x\nBOGUS\n") is None
