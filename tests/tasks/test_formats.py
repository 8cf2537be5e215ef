"""Harbor and Terminal-Bench layouts: round trips, conversions, clear errors, rejects."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tasks.corpus import import_dir, load_task, seed_paths
from tasks.errors import TaskFormatError
from tasks.harbor import load_harbor, task_files, write_harbor
from tasks.model import Category, Difficulty, NetworkAccess

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "src",
    [FIXTURES / "harbor" / "csv-report", FIXTURES / "harbor" / "schema-11", *seed_paths()],
    ids=lambda p: p.name,
)
def test_harbor_round_trip_is_byte_for_byte(src: Path, tmp_path: Path):
    task = load_harbor(src)
    write_harbor(task, tmp_path / "out")
    assert tree(tmp_path / "out") == tree(src)
    assert load_harbor(tmp_path / "out").content_hash == task.content_hash


def test_foreign_task_toml_is_read_with_defaults():
    task = load_harbor(FIXTURES / "harbor" / "csv-report")
    assert task.category == Category.DATA_PROCESSING
    assert task.difficulty == Difficulty.EASY
    assert task.author == "Fixture Author"
    assert task.limits.verifier_timeout_s == 30.0
    assert task.limits.memory_mb == 512 and task.limits.disk_mb == 128
    assert task.environment.files["app/sales.csv"].startswith(b"region,amount")


def test_harbor_schema_11_fields_are_read():
    task = load_harbor(FIXTURES / "harbor" / "schema-11")
    assert task.package is not None and task.package.name == "fixtures/schema-11"
    assert task.package.authors[0].email == "fixture@example.com"
    assert task.package.keywords == ["fixture", "schema"]
    assert task.verifier_config.user == "root" and task.verifier_config.env == {"STRICT": "1"}
    assert task.verifier_config.network_mode == NetworkAccess.NO_NETWORK
    assert task.agent_config.user == "1000"
    assert task.agent_config.allowed_hosts == ["example.org", "*.example.net"]
    env = task.environment
    assert env.docker_image == "example.org/prebuilt:1" and env.env["API_URL"].endswith(":8000")
    assert env.network_mode == NetworkAccess.PUBLIC and env.allow_network
    assert env.healthcheck is not None and env.healthcheck.retries == 5
    assert env.healthcheck.interval_sec == 1.0 and env.healthcheck.timeout_sec == 30.0
    assert task.solution_env == {"SOLVER": "oracle"}
    assert env.workdir == "/srv"  # from the Dockerfile's WORKDIR, not a forced /app


def test_harbor_schema_11_fields_survive_an_edit(tmp_path: Path):
    task = load_harbor(FIXTURES / "harbor" / "schema-11")
    edited = task.model_copy(update={"name": "renamed"})
    write_harbor(edited, tmp_path / "out")
    text = (tmp_path / "out" / "task.toml").read_text()
    assert text.startswith('schema_version = "1.1"')
    again = load_harbor(tmp_path / "out")
    for field in ("package", "agent_config", "verifier_config", "solution_env"):
        assert getattr(again, field) == getattr(task, field), field
    keep = ("docker_image", "env", "network_mode", "allowed_hosts", "healthcheck", "workdir")
    for field in keep:
        assert getattr(again.environment, field) == getattr(task.environment, field), field


def test_bad_harbor_11_value_names_the_field(tmp_path: Path):
    src = tmp_path / "bad"
    shutil.copytree(FIXTURES / "harbor" / "schema-11", src)
    toml = src / "task.toml"
    toml.write_text(toml.read_text().replace('network_mode = "public"', 'network_mode = "open"'))
    with pytest.raises(TaskFormatError) as e:
        load_harbor(src)
    assert "network_mode" in str(e.value) and "task.toml" in str(e.value)


def test_any_edit_changes_the_content_hash(tmp_path: Path):
    task = load_harbor(FIXTURES / "harbor" / "csv-report")
    h = task.content_hash
    edited = task.model_copy(update={"verifier": {**task.verifier, "extra.txt": b"x"}})
    assert edited.content_hash != h
    retimed = task.model_copy(
        update={"limits": task.limits.model_copy(update={"agent_timeout_s": 99.0})}
    )
    assert retimed.content_hash != h
    # An edited task writes a canonical task.toml that reads back to the same model.
    write_harbor(retimed, tmp_path / "t")
    again = load_harbor(tmp_path / "t")
    assert again.limits.agent_timeout_s == 99.0
    assert again.content_hash == retimed.content_hash


def test_solution_less_task_imports(tmp_path: Path):
    src = FIXTURES / "harbor" / "csv-report"
    dst = tmp_path / "no-solution"
    shutil.copytree(src, dst)
    shutil.rmtree(dst / "solution")
    task = load_harbor(dst)
    assert task.solution_less and task.solution is None


def test_terminal_bench_task_converts_to_harbor(tmp_path: Path):
    task = load_task(FIXTURES / "terminal-bench" / "tb-count-lines")
    assert task.category == Category.SCRIPTING_AUTOMATION  # file-operations alias
    assert task.limits.agent_timeout_s == 180 and task.limits.verifier_timeout_s == 30
    assert task.environment.files["Dockerfile"].startswith(b"FROM ")
    assert "docker-compose.yaml" in task.environment.files
    assert task.verifier["test.sh"].startswith(b"#!/bin/bash\nexport TEST_DIR=/tests\n")
    assert "test_outputs.py" in task.verifier
    assert task.solution == {
        "solve.sh": b"#!/bin/bash\ncat /app/logs/*.log | wc -l > /app/total.txt\n"
    }
    write_harbor(task, tmp_path / "h")
    back = load_harbor(tmp_path / "h")
    assert back.content_hash == task.content_hash


def test_terminal_bench_solution_yaml_becomes_solve_sh():
    task = load_task(FIXTURES / "terminal-bench" / "tb-yaml-solution")
    assert task.solution is not None
    solve = task.solution["solve.sh"].decode()
    assert "echo hello > /app/hello.txt" in solve and solve.startswith("#!/bin/bash")
    assert task.category == Category.SOFTWARE_DEVELOPMENT


@pytest.mark.parametrize(
    ("name", "file", "field"),
    [
        ("bad-toml", "task.toml", None),
        ("missing-instruction", "instruction.md", None),
        ("bad-difficulty", "task.toml", "metadata.difficulty"),
        ("no-tests", "test.sh", None),
        ("tb-no-instruction", "task.yaml", "instruction"),
    ],
)
def test_malformed_task_error_names_file_and_field(name, file, field):
    with pytest.raises(TaskFormatError) as err:
        load_task(FIXTURES / "malformed" / name)
    assert err.value.path.endswith(file)
    assert err.value.field == field
    assert file in str(err.value)


def test_bulk_import_records_rejects_and_goes_on(tmp_path: Path):
    mixed = tmp_path / "mixed"
    for d in [
        "malformed/bad-toml",
        "malformed/no-tests",
        "harbor/csv-report",
        "terminal-bench/tb-count-lines",
        "terminal-bench/tb-yaml-solution",
    ]:
        shutil.copytree(FIXTURES / d, mixed / Path(d).name)
    (mixed / "empty-dir").mkdir()
    tasks, rejects = import_dir(mixed)
    assert sorted(t.id for t in tasks) == ["csv-report", "tb-count-lines", "tb-yaml-solution"]
    assert sorted(Path(r.path).name for r in rejects) == ["bad-toml", "empty-dir", "no-tests"]
    assert all(r.reason for r in rejects)


def test_invalid_id_is_rejected():
    task = load_harbor(FIXTURES / "harbor" / "csv-report")
    with pytest.raises(ValueError, match="lowercase slug"):
        task.model_validate({**task.model_dump(), "id": "Bad Id!"})


def test_task_files_cover_every_part():
    task = load_harbor(FIXTURES / "harbor" / "csv-report")
    files = task_files(task)
    assert {
        "task.toml",
        "instruction.md",
        "solution/solve.sh",
        "tests/test.sh",
        "environment/Dockerfile",
        "environment/app/sales.csv",
    } <= set(files)


def test_terminal_bench_uv_boilerplate_runs_offline():
    task = load_task(FIXTURES / "terminal-bench" / "tb-uv-boilerplate")
    script = task.verifier["test.sh"].decode()
    assert task.environment.verifier_packages == ["pytest==8.4.1", "requests==2.32.3"]
    assert "astral.sh" not in script and "apt-get" not in script and "uv " not in script
    assert script.splitlines()[2] == 'export PATH="/usr/lib/t1-verifier/bin:$PATH"'
    assert "\npytest $TEST_DIR/test_outputs.py -rA\n" in script
    assert 'if [ "$PWD" = "/" ]' in script  # the rest of the script is kept as written
    assert task.verifier_config.network_mode is None
    assert task.environment.workdir == "/app"


@pytest.mark.parametrize(
    "body",
    [
        "curl -sSL https://example.org/data.json -o /tmp/d.json\npytest /tests -rA\n",
        "pip install hypothesis\npytest /tests -rA\n",
        "curl -LsSf https://astral.sh/uv/install.sh | sh\nuv pip install pytest\n"
        "git clone https://example.org/repo.git\nuv run pytest\n",
    ],
)
def test_verifier_needing_the_network_is_marked_not_rewritten(body: str):
    from tasks.terminal_bench import offline_run_tests

    assert offline_run_tests(body) is None


def test_plain_run_tests_is_kept_as_written():
    from tasks.terminal_bench import offline_run_tests

    body = "python3 -m pytest $TEST_DIR/test_outputs.py -rA  # curl not needed\n"
    assert offline_run_tests(body) == (body, [])


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("go get github.com/stretchr/testify@v1.9.0", "go modules"),
        ("cd /app && go mod download", "go modules"),
        ("go install gotest.tools/gotestsum@latest", "go modules"),
        ("GOFLAGS=-mod=mod go test ./...", "go modules"),
        ("add-apt-repository -y ppa:deadsnakes/ppa", "ppa"),
        ("apt-get -y install python3.12", "apt"),
        ("apt update", "apt"),
        ("wget -q https://example.org/data.tgz", "download"),
        ("curl -fsSL https://deb.nodesource.com/setup_20.x | bash -", "download"),
        ("python3 -m pip install numpy==2.0", "python packages"),
        ("uvx ruff check /app", "python packages"),
        ("npm ci --prefix /app", "node packages"),
        ("cargo install cargo-nextest", "rust crates"),
        ("git clone --depth 1 https://github.com/x/y /tmp/y", "git remote"),
        ("gem install rspec", "packages"),
        ("Rscript -e 'install.packages(\"testthat\")'", "packages"),
    ],
)
def test_verifier_internet_needs_are_typed_with_a_reason(line: str, kind: str):
    from tasks.terminal_bench import verifier_network_need

    need = verifier_network_need(f"cd /app\n{line}\npytest $TEST_DIR -rA\n")
    assert need is not None and need.kind.value == kind and need.line == 2
    assert need.reason.startswith(f"run-tests.sh line 2 fetches {kind}: ")
    assert line.split()[0] in need.reason


@pytest.mark.parametrize(
    "line",
    [
        "curl -sf http://localhost:8080/health",  # the agent's own server
        "curl -s 127.0.0.1:5000/api | jq .",
        "go test ./...",  # modules vendored or cached at build time
        "cargo test --offline",
        "git log --oneline | head",
        "echo 'run: pip install x' > /dev/null  # not run",
    ],
)
def test_local_commands_do_not_need_the_internet(line: str):
    from tasks.terminal_bench import verifier_network_need

    assert verifier_network_need(f"{line}\n") is None


def test_a_verifier_needing_the_internet_records_why(tmp_path: Path):
    src = FIXTURES / "terminal-bench" / "tb-count-lines"
    task_dir = tmp_path / "tb-go"
    shutil.copytree(src, task_dir)
    (task_dir / "run-tests.sh").write_text(
        "#!/bin/bash\ncd /app\ngo get github.com/stretchr/testify\ngo test ./... -v\n"
    )
    task = load_task(task_dir)
    assert task.verifier_config.network_mode == NetworkAccess.PUBLIC
    script = task.verifier["test.sh"].decode()
    assert script.splitlines()[2] == (
        "# t1: needs the internet at verify time (network_mode = public): "
        "run-tests.sh line 2 fetches go modules: go get github.com/stretchr/testify"
    )
    assert script.endswith("go get github.com/stretchr/testify\ngo test ./... -v\n")


def test_go_mod_download_needs_the_internet_only_when_go_mod_requires_modules():
    from tasks.terminal_bench import verifier_network_need

    body = "cd /app\nif [ -f go.mod ]; then\n    go mod download\nfi\ngo test ./...\n"
    bare = {"app/go.mod": b"module meetup\n\ngo 1.18\n"}
    requires = {"app/go.mod": b"module meetup\n\ngo 1.21\n\nrequire github.com/x/y v1.2.3\n"}
    block = {"go.mod": b"module m\n\nrequire (\n\tgithub.com/x/y v1.2.3\n)\n"}
    assert verifier_network_need(body, bare) is None
    for files in (requires, block, {}):  # no go.mod to judge by: taken to need modules
        need = verifier_network_need(body, files)
        assert need is not None and need.kind.value == "go modules" and need.line == 3
    need = verifier_network_need("go get github.com/x/y\n", bare)
    assert need is not None and need.kind.value == "go modules"
