"""The Dockerfile interpreter: parsing as Docker reads a file, and COPY/ADD/RUN executed as
Docker executes them, into a real image layer built in a container-mode sandbox."""

from __future__ import annotations

import asyncio
import io
import tarfile
from pathlib import Path

import pytest

from practicum.envs.dockerfile import DEFAULT_PATH, Copy, MakeDir, Run, parse_dockerfile, substitute
from practicum.envs.images import ImageBuildError, build_image, install_requests, verifier_requirements
from practicum.sandbox import get_sandbox


def test_parse_final_stage_env_arg_workdir_and_problems():
    text = """# syntax=docker/dockerfile:1
ARG BASE=python:3.13-slim
FROM ${BASE} AS builder
RUN echo first stage
FROM ubuntu:24.04
ARG APP=/srv
ENV HOME_DIR=$APP/home \\
    MODE=test
WORKDIR ${APP}
WORKDIR app
RUN echo "$MODE" && \\
    echo more
COPY --chown=1000:1000 a.txt b.txt sub/
COPY --from=builder /x /y
ADD https://example.com/f.tar.gz /opt/
CMD ["bash"]
"""
    r = parse_dockerfile(text)
    assert r.base == "ubuntu:24.04"
    assert r.workdir == "/srv/app"
    assert r.env == {"HOME_DIR": "/srv/home", "MODE": "test"}
    kinds = [type(s) for s in r.steps]
    assert kinds == [MakeDir, MakeDir, Run, Copy, Copy]  # nothing of the first stage but what is copied from it
    run = r.steps[2]
    assert isinstance(run, Run) and run.argv[:2] == ("/bin/sh", "-c") and "echo more" in run.argv[2]
    assert run.context.workdir == "/srv/app" and run.context.environ["MODE"] == "test"
    copy = r.steps[3]
    assert isinstance(copy, Copy) and copy.dest == "/srv/app/sub" and copy.dest_is_dir and copy.chown == "1000:1000"
    staged = r.steps[4]
    assert isinstance(staged, Copy) and staged.stage == "0" and staged.sources == ("/x",) and staged.dest == "/y"
    assert r.stages["0"].base == "python:3.13-slim" and [type(s) for s in r.stages["0"].steps] == [Run]
    assert [p.line for p in r.problems] == [15]  # ADD of a URL, with its line
    assert "URL" in r.problems[0].message
    assert r.ignored == ["CMD"]


def test_multi_stage_forms():
    """COPY --from a stage by name (any case) or index; FROM an earlier stage goes on from it; an
    image that is not a stage is still refused; a stage's own problem counts only when copied from."""
    r = parse_dockerfile("FROM a AS Build\nWORKDIR /w\nENV K=v\nRUN make\nFROM build AS more\nRUN make more\n"
                         "FROM scratch AS unused\nRUN --mount=type=cache x\n"
                         "FROM ubuntu\nCOPY --from=MORE /w/out /out\nCOPY --from=0 /w /w0/\n")
    assert r.problems == []  # the unused stage's RUN --mount does not matter
    assert sorted(r.stages) == ["0", "1"] and [s.stage for s in r.steps] == ["1", "0"]
    more = r.stages["1"]
    assert [getattr(s, "text", None) for s in more.steps if isinstance(s, Run)] == ["make", "make more"]
    assert more.env == {"K": "v"} and more.workdir == "/w" and more.base == "a"
    bad = parse_dockerfile("FROM a AS b\nRUN --mount=type=cache x\nFROM c\nCOPY --from=b /x /y\nCOPY --from=other /x /y\n")
    assert [p.line for p in bad.problems] == [2, 5] and "another image" in bad.problems[1].message


def test_heredoc_run_and_substitution_forms():
    r = parse_dockerfile("FROM x\nRUN <<EOF\necho one\necho two\nEOF\nRUN [\"echo\", \"exec form\"]\n")
    assert len(r.steps) == 2
    assert "echo one\necho two" in r.steps[0].argv[2]
    assert r.steps[1].argv == ("echo", "exec form")
    assert substitute("${A:-dflt}/${B:+alt}/$C/\\$D", {"B": "1", "C": "c"}) == ("dflt/alt/c/$D", set())
    assert substitute("$NOPE", {})[1] == {"NOPE"}


def test_heredocs_as_buildkit_reads_them():
    """A blank after `<<` (`python3 << 'EOF'`, common in real tasks) is a here-document, as in
    BuildKit; a line that is only a here-document runs its body; a command keeps its
    here-documents with their terminators; `$((1 << 2))` is a shift, not a here-document."""
    text = ("FROM x\nRUN mkdir -p /d && python3 << 'INIT'\nimport os\nprint(1)\nINIT\nRUN echo after\n"
            "RUN <<EOF\necho one\nEOF\nRUN cat > /f <<-EOF\n\thello $HOME\n\tEOF\nRUN echo $((1 << 2))\n")
    r = parse_dockerfile(text)
    assert r.problems == []
    assert [s.argv[2] for s in r.steps] == [
        "mkdir -p /d && python3 << 'INIT'\nimport os\nprint(1)\nINIT\n", "echo after", "echo one\n",
        "cat > /f <<-EOF\nhello $HOME\nEOF\n", "echo $((1 << 2))"]
    shebang = parse_dockerfile("FROM x\nRUN <<EOF\n#!/usr/bin/env python3\nprint(6 * 7)\nEOF\n").steps[0].argv[2]
    assert "#!/usr/bin/env python3\nprint(6 * 7)\n" in shebang and '"$f"' in shebang  # run as a file


def test_no_from_is_a_problem():
    assert "before the first FROM" in str(parse_dockerfile("RUN echo hi\n").problems[0])
    assert "no FROM" in str(parse_dockerfile("# only a comment\n").problems[0])


def test_verifier_requirements_from_the_standard_bootstraps():
    tb2 = ("curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh\nuvx \\\n  -p 3.13 \\\n  -w pytest==8.4.1 \\\n"
           "  -w pytest-json-ctrf==0.3.5 \\\n  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA\n")
    assert verifier_requirements([tb2]) == ["pytest", "pytest==8.4.1", "pytest-json-ctrf==0.3.5"]
    other = "uv init\nuv add pytest==8.4.1\npip install pytest==8.4.1 requests==2.32.5 && pytest\nuvx --with rich ruff check\n"
    assert set(verifier_requirements([other])) == {"pytest", "pytest==8.4.1", "requests==2.32.5", "rich", "ruff"}
    quiet = "python3 -m pip install -q pytest==9.0.3 2>/dev/null || true\npip3 install attrs >/dev/null 2>&1\n"
    assert verifier_requirements([quiet]) == ["pytest", "pytest==9.0.3", "attrs"]  # a redirection is not a package
    other_w = "figlet -w 200 hi | cmp -s - banner.txt\nuv run --with rich==14.0.0 python x.py\n"
    assert verifier_requirements([other_w]) == ["pytest", "rich==14.0.0"]  # another command's -w is not uvx's
    index = "uvx --index https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match -w numpy==2.3.1 ruff check\n"
    assert verifier_requirements([index]) == ["pytest", "numpy==2.3.1", "ruff"]  # the tool, not the index's URL


def test_the_verifier_uvx_stand_in_reads_uvs_index_options():
    """TB2 pytorch-model-cli's test.sh: `uvx --index URL --index-strategy S -p 3.13 -w torch==2.7.1 ... pytest`;
    the stand-in had taken the URL for a package the toolchain lacked."""
    from practicum.envs.verifier_shim import split_options

    args = ["--index", "https://download.pytorch.org/whl/cpu", "--index-strategy", "unsafe-best-match", "-p", "3.13",
            "-w", "torch==2.7.1", "-w", "numpy==2.3.1", "pytest", "--ctrf", "/logs/verifier/ctrf.json", "-rA"]
    assert split_options(args) == (["torch==2.7.1", "numpy==2.3.1"], ["pytest", "--ctrf", "/logs/verifier/ctrf.json", "-rA"])


def test_the_verifier_pip_stand_in_hands_a_local_index_to_the_real_pip():
    """`pip install --index-url http://localhost:8080/simple pkg` (TB2 pypi-server's test, against the
    server the agent runs) goes to the real pip; a remote index is still served from the toolchain."""
    from practicum.envs.verifier_shim import local_index

    assert local_index(["install", "--index-url", "http://localhost:8080/simple", "vectorops==0.1.0"])
    assert local_index(["install", "--index-url=http://127.0.0.1:8080/simple/", "x"])
    assert local_index(["install", "-f", "/app/dist", "x"]) and local_index(["install", "--find-links=file:///w", "x"])
    assert not local_index(["install", "-i", "https://pypi.org/simple", "pytest==8.4.1"])
    assert not local_index(["install", "--index-url", "https://localhost.example.com/simple", "x"])
    assert not local_index(["install", "pytest"])


def test_install_requests_of_solutions_and_tests():
    """What a task's scripts install at run time, in the forms TB2 solutions and tests write."""
    solve = ("apt-get update && apt-get install -y --no-install-recommends \\\n    primer3=2.4.0-1 emboss:amd64 \\\n"
             "    && rm -rf /var/lib/apt/lists/*\nDEBIAN_FRONTEND=noninteractive apt -y install expect > /dev/null\n"
             "pip install grpcio==1.73.0 'grpcio-tools>=1.73' -r requirements.txt --index-url https://x/simple\n"
             "pip install torch==2.7.0 --index-url https://download.pytorch.org/whl/cpu\npip install -e . numpy\n"
             "apt-get remove -y vim  # not an install\nuvx -w pytest==8.4.1 pytest\n")
    debs, reqs = install_requests([solve, "apt-get install -y expect curl\n"])
    assert debs == ["primer3", "emboss", "expect", "curl"]
    assert reqs == ["grpcio==1.73.0", "grpcio-tools>=1.73", "numpy"]  # not the files, the URLs, torch or uvx's


def test_requirements_files_and_what_scripts_write_into_them(tmp_path):
    """The project's requirements files (in the build context) and those a solution writes with a
    here-document, either redirection order, are fetched ahead; comments, options, nested files,
    URLs, local paths and other here-documents are not requirements."""
    from practicum.envs.images import PREFETCH_WHEELS, context_requirements, written_requirements
    from practicum.envs.verifier_shim import PREFETCHED, missing_from

    solve = ("cat > service/requirements.txt <<'EOF'\nfastapi==0.115.0\nuvicorn==0.30.6  # server\nEOF\n"
             "cat <<EOF > requirements-dev.txt\n# dev\n-r requirements.txt\npytest>=8\nhttps://x.org/a.whl\n./local\nEOF\n"
             "cat > notes.txt <<EOF\nnot-a-requirement\nEOF\n")
    assert written_requirements([solve]) == ["fastapi==0.115.0", "uvicorn==0.30.6", "pytest>=8"]
    (tmp_path / "svc").mkdir()
    (tmp_path / "svc" / "requirements.txt").write_text("requests==2.32.3\n--index-url https://x/simple\n")
    (tmp_path / "requirements-test.txt").write_text("iniconfig\n")
    (tmp_path / "README.txt").write_text("flask\n")
    assert context_requirements(tmp_path) == ["iniconfig", "requests==2.32.3"]
    assert install_requests([solve], ["torch==2.7.0", "iniconfig"])[1] == [
        "fastapi==0.115.0", "uvicorn==0.30.6", "pytest>=8", "iniconfig"]  # torch is never fetched ahead
    assert PREFETCHED == PREFETCH_WHEELS  # the verifier's pip stand-in looks where the build put them
    assert missing_from(["fastapi==0.115.0", "uvicorn", "pytest==8.4.1"], {"fastapi": "0.115.0", "pytest": "8.3.0"}) == [
        "uvicorn", "pytest==8.4.1"]


def test_env_path_extends_the_base_images_path():
    """`ENV PATH="/root/.local/bin:${PATH}"` extends the PATH every base image defines (it had
    dropped /usr/bin and /bin: `cp: not found` in the next RUN line of a public task)."""
    r = parse_dockerfile('FROM gcc:13\nENV PATH="/root/.local/bin:${PATH}"\nRUN cp a b\n')
    assert r.steps[0].context.environ["PATH"] == "/root/.local/bin:" + DEFAULT_PATH
    assert r.env["PATH"] == "/root/.local/bin:" + DEFAULT_PATH


# --- building, for real -------------------------------------------------------------------------------


def _context(tmp_path: Path, dockerfile: str) -> Path:
    ctx = tmp_path / "environment"
    (ctx / "data" / "nested").mkdir(parents=True)
    (ctx / "data" / "one.txt").write_text("one\n")
    (ctx / "data" / "nested" / "two.txt").write_text("two\n")
    (ctx / "script.sh").write_text("#!/bin/sh\necho ran > /app/ran.txt\n")
    (ctx / "script.sh").chmod(0o755)
    (ctx / "private.txt").write_text("only root may read\n")
    (ctx / "private.txt").chmod(0o600)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("inner/packed.txt")
        payload = b"packed\n"
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    (ctx / "bundle.tar").write_bytes(buf.getvalue())
    (ctx / "Dockerfile").write_text(dockerfile)
    return ctx / "Dockerfile"


DOCKERFILE = """FROM ubuntu:24.04
WORKDIR /app
ENV GREETING=hello
COPY data/ /app/
COPY data /data
COPY script.sh /usr/local/bin/renamed-script
COPY private.txt .
COPY --chown=1234:1234 data/one.txt owned/
ADD bundle.tar /unpacked/
RUN renamed-script && echo "$GREETING" > greeting.txt && mkdir -p /server && rm /etc/issue
"""


def test_copy_run_and_layer_as_docker_does_them(tmp_path, monkeypatch):
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    dockerfile = _context(tmp_path, DOCKERFILE)

    async def go():
        image = await build_image(dockerfile)
        again = await build_image(dockerfile)
        s = await get_sandbox().session(workdir="/app", container=image.container())
        try:
            r = await s.exec(["bash", "-c", "cat one.txt nested/two.txt /data/one.txt /data/nested/two.txt; "
                              "cat ran.txt greeting.txt private.txt /unpacked/inner/packed.txt; "
                              "stat -c %u owned/one.txt; ls -d /server; test -e /etc/issue || echo issue-gone; "
                              "test -e /app/data || echo no-data-folder; echo $GREETING"])
        finally:
            await s.close()
        return image, again, r

    image, again, r = asyncio.run(go())
    assert again.layer == image.layer  # built once, then cached
    assert r.ok, r
    assert r.stdout.split() == ["one", "two", "one", "two", "ran", "hello", "only", "root", "may", "read", "packed",
                                "1234", "/server", "issue-gone", "no-data-folder", "hello"]
    assert image.workdir == "/app"


def built_and_run(dockerfile: Path, script: str, workdir: str = "/app", context: Path | None = None):
    """Build ``dockerfile``'s image, run ``script`` with bash in a session of it, and return the record."""

    async def go():
        image = await build_image(dockerfile, context=context)
        s = await get_sandbox().session(workdir=workdir, container=image.container())
        try:
            return await s.exec(["bash", "-c", script])
        finally:
            await s.close()

    return asyncio.run(go())


def test_a_multi_stage_build_copies_what_the_earlier_stage_made(tmp_path, monkeypatch):
    """TB2's financial-document-processor: a `build` stage prepares files, the image copies them
    with `COPY --from=build`; the stage's other files are not in the image."""
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    dockerfile = _context(tmp_path, "FROM ubuntu:24.04 as build\nCOPY data/ /tmp/in/\nWORKDIR /root\n"
                                    "RUN mkdir -p /app/docs && for f in /tmp/in/*.txt; do tr a-z A-Z < $f > /app/docs/$(basename $f); done "
                                    "&& printf '#!/bin/sh\\necho tool\\n' > /usr/local/bin/tool && chmod +x /usr/local/bin/tool "
                                    "&& touch /stage-only\n"
                                    "FROM ubuntu:24.04 AS target\nCOPY --from=build /app/docs /app/documents\n"
                                    "COPY --from=0 /usr/local/bin/tool /usr/local/bin/\nCOPY --from=build /etc/os-release /copied/\n"
                                    "WORKDIR /app\n")
    r = built_and_run(dockerfile, "cat documents/one.txt; tool; test -e /stage-only || echo no-stage-file; "
                                  "test -e /tmp/in || echo no-stage-input; cmp /etc/os-release /copied/os-release && echo same")
    assert r.ok, r
    assert r.stdout.split() == ["ONE", "tool", "no-stage-file", "no-stage-input", "same"]
    missing = _context(tmp_path / "m", "FROM a AS build\nRUN true\nFROM b\nCOPY --from=build /nowhere /x\n")
    with pytest.raises(ImageBuildError, match="/nowhere not found in that stage"):
        asyncio.run(build_image(missing))


def test_heredoc_run_lines_run_as_buildkit_runs_them(tmp_path, monkeypatch):
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    dockerfile = _context(tmp_path, "FROM ubuntu:24.04\nWORKDIR /app\nENV WHO=world\n"
                                    "RUN mkdir -p /app/data && python3 << 'INIT_DB'\n"
                                    "import sqlite3\nsqlite3.connect('/app/data/x.db').execute('create table t (a)')\nINIT_DB\n"
                                    "RUN <<EOF\necho body > body.txt\necho \"$WHO\" >> body.txt\nEOF\n"
                                    "RUN <<EOF\n#!/usr/bin/env python3\nopen('/app/py.txt', 'w').write(str(6 * 7))\nEOF\n"
                                    "RUN cat > quoted.txt <<'EOF'\n$WHO stays\nEOF\n")

    r = built_and_run(dockerfile, "ls data; cat body.txt py.txt quoted.txt", workdir="/app")
    assert r.ok, r
    assert r.stdout.split("\n") == ["x.db", "body", "world", "42$WHO stays", ""]


def test_a_failing_run_line_names_its_line_and_output(tmp_path, monkeypatch):
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    dockerfile = _context(tmp_path, "FROM ubuntu:24.04\nRUN echo about to fail && false\n")
    with pytest.raises(ImageBuildError, match=r"line 2.*about to fail"):
        asyncio.run(build_image(dockerfile))
    assert not list((tmp_path / "home" / "images").glob("*/complete"))  # nothing half-built is cached


def test_copy_of_a_missing_source_fails_the_build(tmp_path, monkeypatch):
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    dockerfile = _context(tmp_path, "FROM ubuntu:24.04\nCOPY nothing-here.txt /app/\n")
    with pytest.raises(ImageBuildError, match="nothing-here.txt"):
        asyncio.run(build_image(dockerfile))


def test_copy_from_uvs_image_is_served_from_pypi_and_other_images_are_refused():
    r = parse_dockerfile("FROM python:3.12-slim\nCOPY --from=ghcr.io/astral-sh/uv:0.8.15 /uv /uvx /bin/\n"
                         "COPY --from=ghcr.io/astral-sh/uv:latest /uv /usr/local/bin/uv\n")
    assert r.problems == []
    assert [(s.sources, s.dest, s.tool) for s in r.steps] == [(("/uv", "/uvx"), "/bin", ("uv", "==0.8.15")),
                                                             (("/uv",), "/usr/local/bin/uv", ("uv", ""))]
    for line, why in [("COPY --from=builder /out /x", "another image is not supported"),
                      ("COPY --from=ghcr.io/astral-sh/uv@sha256:ab12 /uv /bin/", "pin its version tag"),
                      ("COPY --from=ghcr.io/astral-sh/uv:0.8 /etc/passwd /x", "served with /uv, /uvx only"),
                      ("COPY --from=ghcr.io/astral-sh/uv:python3.12-bookworm /uv /bin/", "tag 'python3.12-bookworm'")]:
        problems = parse_dockerfile(f"FROM x\n{line}\n").problems
        assert len(problems) == 1 and why in problems[0].message and problems[0].line == 2, (line, problems)


def test_copy_from_uvs_image_builds_with_the_release_it_names(tmp_path, monkeypatch):
    """uv's own documented install line, built for real: the binaries of that release, from the
    package registry (the machine's only network), land where the line puts them."""
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    dockerfile = _context(tmp_path, "FROM python:3.12-slim\nCOPY --from=ghcr.io/astral-sh/uv:0.8.15 /uv /uvx /bin/\n")

    r = built_and_run(dockerfile, "uv --version; uvx --version; ls -l /bin/uv | cut -c1-10")
    assert r.ok, r
    assert r.stdout.splitlines() == ["uv 0.8.15", "uvx 0.8.15", "-rwxr-xr-x"], r.stdout


def test_uv_in_a_run_line_reaches_the_registry_with_the_machines_certificates(tmp_path, monkeypatch):
    """`RUN uv run --with PKG ...` fetches from PyPI at build time, as TB2's reshard-c4-data does; uv
    carries its own root certificates, so behind this machine's registry proxy it failed ("invalid
    peer certificate: UnknownIssuer") until the build passed on the machine's SSL_CERT_FILE."""
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    dockerfile = _context(tmp_path, "FROM python:3.13-slim\nCOPY --from=ghcr.io/astral-sh/uv:0.8.14 /uv /uvx /bin/\n"
                                    "WORKDIR /app\nRUN uv run --no-project --with six python -c 'import six; print(six.PY3)' > six.txt\n")
    r = built_and_run(dockerfile, "cat six.txt")
    assert r.ok and r.stdout.strip() == "True", r


def test_uvs_installer_in_a_run_line_installs_that_release(tmp_path, monkeypatch):
    """`curl -LsSf https://astral.sh/uv/X/install.sh | sh` (a site the build cannot reach) leaves
    that uv release in ~/.local/bin, as the real installer does, for the next RUN lines."""
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    dockerfile = _context(tmp_path, "FROM gcc:13.3.0-bookworm\nRUN curl -LsSf https://astral.sh/uv/0.8.15/install.sh | sh\n"
                                    'ENV PATH="/root/.local/bin:${PATH}"\n'
                                    "RUN cp /root/.local/bin/uv /root/.local/bin/uvx /usr/local/bin/\n")
    r = built_and_run(dockerfile, "/usr/local/bin/uv --version; /root/.local/bin/uvx --version")
    assert r.ok and r.stdout.splitlines() == ["uv 0.8.15", "uvx 0.8.15"], r


def test_a_build_context_other_than_the_dockerfiles_folder(tmp_path, monkeypatch):
    """A task's compose file can make the task folder the context (COPY app/ from beside environment/)."""
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    (tmp_path / "task" / "environment").mkdir(parents=True)
    (tmp_path / "task" / "app").mkdir()
    (tmp_path / "task" / "app" / "main.py").write_text("print('from the task folder')\n")
    dockerfile = tmp_path / "task" / "environment" / "Dockerfile"
    dockerfile.write_text("FROM ubuntu:24.04\nWORKDIR /app\nCOPY app/ /app/\n")
    with pytest.raises(ImageBuildError, match="app/"):  # the Dockerfile's own folder has no app/
        asyncio.run(build_image(dockerfile))

    r = built_and_run(dockerfile, "python3 main.py", context=tmp_path / "task")
    assert r.ok and r.stdout == "from the task folder\n", r
